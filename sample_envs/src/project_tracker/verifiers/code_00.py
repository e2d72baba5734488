def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _row(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchone()
        finally:
            conn.close()

    sql = "SELECT assignee_id, due_date FROM issues WHERE issue_key = 'WEB-3'"
    before = _row(initial_db_path, sql)
    after = _row(final_db_path, sql)
    if before is None or after is None or before != after:
        return {"result": "others"}
    answer = (final_answer or "").lower()
    if "sofia" not in answer or "lindqvist" not in answer:
        return {"result": "others"}
    date_patterns = [r"2026-03-12", r"2026/03/12", r"03/12/2026", r"12/03/2026", r"12\.03\.2026",
                     r"march\s+12(th)?\b", r"\bmar\.?\s+12(th)?\b", r"\b12(th)?\s+(of\s+)?march", r"\b12(th)?\s+mar\b"]
    if not any(re.search(p, answer) for p in date_patterns):
        return {"result": "others"}
    return {"result": "complete"}
