def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _issues(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            cur = conn.execute(
                "SELECT i.id, i.issue_key, p.name AS project, i.title, i.issue_type, i.status, i.priority, i.story_points, "
                "u.full_name AS assignee, s.name AS sprint, sp.name AS sprint_project, i.reporter_id FROM issues i "
                "JOIN projects p ON p.id = i.project_id LEFT JOIN users u ON u.id = i.assignee_id "
                "LEFT JOIN sprints s ON s.id = i.sprint_id LEFT JOIN projects sp ON sp.id = s.project_id ORDER BY i.id")
            return [dict(zip([d[0] for d in cur.description], r)) for r in cur.fetchall()]
        finally:
            conn.close()

    initial = _issues(initial_db_path)
    final = _issues(final_db_path)
    initial_ids = {r["id"] for r in initial}
    return {
        "expected": {"project": "Customer Web Portal", "title": "Password reset email link expires too early", "issue_type": "bug",
                     "priority": "high", "story_points": 3, "assignee": "Kenji Watanabe", "sprint": "Sprint 15 of Customer Web Portal (id 2, not Mobile App's id 5)"},
        "issue_count_initial": len(initial),
        "issue_count_final": len(final),
        "new_issues": [r for r in final if r["id"] not in initial_ids],
        "deleted_issue_ids": sorted(initial_ids - {r["id"] for r in final}),
    }
