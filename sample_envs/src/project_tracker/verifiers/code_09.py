def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _state(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            member = conn.execute("SELECT role FROM project_members WHERE project_id = 3 AND user_id = 6").fetchone()
            issue = conn.execute("SELECT assignee_id FROM issues WHERE issue_key = 'PLAT-1'").fetchone()
            return member, issue
        finally:
            conn.close()

    member_before, issue_before = _state(initial_db_path)
    member_after, issue_after = _state(final_db_path)
    if member_before is not None or issue_before is None or issue_before[0] == 6:
        return {"result": "others"}
    if member_after is None or member_after[0] != "maintainer":
        return {"result": "others"}
    if issue_after is None or issue_after[0] != 6:
        return {"result": "others"}
    return {"result": "complete"}
