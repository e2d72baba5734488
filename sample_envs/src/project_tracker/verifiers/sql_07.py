def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _state(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            sprints = [dict(zip(["id", "project", "name", "status", "completed_at"], r)) for r in conn.execute(
                "SELECT s.id, p.name, s.name, s.status, s.completed_at FROM sprints s JOIN projects p ON p.id = s.project_id "
                "ORDER BY s.id").fetchall()]
            issues = [dict(zip(["issue_key", "status", "sprint_id", "sprint"], r)) for r in conn.execute(
                "SELECT i.issue_key, i.status, i.sprint_id, s.name FROM issues i LEFT JOIN sprints s ON s.id = i.sprint_id "
                "WHERE i.project_id = 1 ORDER BY i.id").fetchall()]
            return {"sprints": sprints, "web_issues": issues}
        finally:
            conn.close()

    return {
        "expected": "WEB Sprint 15 (id 2) completed; WEB-3, WEB-4, WEB-5, WEB-7 (unfinished) moved to WEB Sprint 16 (id 3); "
                    "WEB-6 (done) stays in Sprint 15; WEB Sprint 16 active; Mobile App sprints untouched",
        "initial": _state(initial_db_path),
        "final": _state(final_db_path),
    }
