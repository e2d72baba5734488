def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _matches(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(
                "SELECT id, project_id, issue_type, priority, story_points, assignee_id, sprint_id FROM issues "
                "WHERE lower(trim(title)) = 'password reset email link expires too early'").fetchall()
        finally:
            conn.close()

    before = _matches(initial_db_path)
    after = _matches(final_db_path)
    before_ids = {r[0] for r in before}
    new_rows = [r for r in after if r[0] not in before_ids]
    if len(new_rows) != 1:
        return {"result": "others"}
    _, project_id, issue_type, priority, points, assignee_id, sprint_id = new_rows[0]
    if (project_id, issue_type, priority, points, assignee_id, sprint_id) != (1, "bug", "high", 3, 4, 2):
        return {"result": "others"}
    return {"result": "complete"}
