def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _issues(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            cur = conn.execute(
                "SELECT i.issue_key, p.name AS project, i.title, i.status, i.assignee_id, u.full_name AS assignee, i.updated_at "
                "FROM issues i JOIN projects p ON p.id = i.project_id LEFT JOIN users u ON u.id = i.assignee_id "
                "WHERE i.title LIKE '%dark mode toggle%' ORDER BY i.id")
            return [dict(zip([d[0] for d in cur.description], r)) for r in cur.fetchall()]
        finally:
            conn.close()

    return {
        "expected": {"issue_key": "MOB-3", "status": "in_review", "assignee": "Priya Raman (user 5, not Priya Ramesh user 9)"},
        "distractors_note": "WEB-7 'Add dark mode toggle to dashboard' must stay unchanged",
        "initial": _issues(initial_db_path),
        "final": _issues(final_db_path),
    }
