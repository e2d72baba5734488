def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _state(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            sprints = dict(conn.execute("SELECT id, status FROM sprints").fetchall())
            issues = dict(conn.execute("SELECT issue_key, sprint_id FROM issues").fetchall())
            return sprints, issues
        finally:
            conn.close()

    sprints_before, issues_before = _state(initial_db_path)
    sprints_after, issues_after = _state(final_db_path)
    if sprints_before.get(2) != "active" or sprints_before.get(3) != "planned":
        return {"result": "others"}
    if sprints_after.get(2) != "completed" or sprints_after.get(3) != "active":
        return {"result": "others"}
    if sprints_after.get(5) != "active":
        return {"result": "others"}
    for key in ("WEB-3", "WEB-4", "WEB-5", "WEB-7"):
        if issues_after.get(key) != 3:
            return {"result": "others"}
    if issues_after.get("WEB-6") != 2 or issues_after.get("WEB-8") != 3:
        return {"result": "others"}
    return {"result": "complete"}
