def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    answer = (final_answer or "").lower()
    if not re.search(r"(?<![\d.])6\.40*(?![\d])", answer):
        return {"result": "others"}
    if "%" not in answer and "percent" not in answer:
        return {"result": "others"}
    sql = "SELECT * FROM lab_results ORDER BY id"
    if _rows(initial_db_path, sql) != _rows(final_db_path, sql):
        return {"result": "others"}
    return {"result": "complete"}
