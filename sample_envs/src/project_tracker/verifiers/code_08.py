def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _ids(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return {r[0] for r in conn.execute("SELECT id FROM comments").fetchall()}
        finally:
            conn.close()

    before = _ids(initial_db_path)
    after = _ids(final_db_path)
    if 2 not in before or 2 in after:
        return {"result": "others"}
    if before - after != {2}:
        return {"result": "others"}
    return {"result": "complete"}
