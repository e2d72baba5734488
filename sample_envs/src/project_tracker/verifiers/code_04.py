def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _issue(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT status, assignee_id FROM issues WHERE issue_key = 'MOB-3'").fetchone()
        finally:
            conn.close()

    before = _issue(initial_db_path)
    after = _issue(final_db_path)
    if before is None or after is None or before == ("in_review", 5):
        return {"result": "others"}
    if after != ("in_review", 5):
        return {"result": "others"}
    return {"result": "complete"}
