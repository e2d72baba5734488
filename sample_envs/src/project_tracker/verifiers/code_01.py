def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _logs(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT t.id, t.minutes FROM time_logs t JOIN issues i ON i.id = t.issue_id "
                                "WHERE i.issue_key = 'WEB-4' ORDER BY t.id").fetchall()
        finally:
            conn.close()

    before = _logs(initial_db_path)
    after = _logs(final_db_path)
    if not before or before != after or sum(m for _, m in before) != 450:
        return {"result": "others"}
    answer = (final_answer or "").lower()
    patterns = [r"(?<![\d.])7\.50?(?![\d])", r"(?<![\d.])7,5(?![\d])", r"(?<![\d.])450\s*(min|minutes|m\b)",
                r"7\s*(h|hr|hrs|hours?)\s*(and\s*)?30\s*(m|min|mins|minutes?)\b", r"seven and a half hours"]
    if not any(re.search(p, answer) for p in patterns):
        return {"result": "others"}
    return {"result": "complete"}
