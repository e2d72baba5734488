def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            cur = conn.execute(
                "SELECT i.issue_key, p.name, i.title, u.full_name, i.due_date, i.status FROM issues i "
                "JOIN projects p ON p.id = i.project_id LEFT JOIN users u ON u.id = i.assignee_id "
                "WHERE i.title LIKE '%times out on slow networks%' ORDER BY i.id")
            return [dict(zip([d[0] for d in cur.description], r)) for r in cur.fetchall()]
        finally:
            conn.close()

    initial = _rows(initial_db_path)
    final = _rows(final_db_path)
    return {
        "expected_answer": {"issue_key": "WEB-3", "assignee": "Sofia Lindqvist", "due_date": "2026-03-12"},
        "distractors_note": "MOB-2 (Priya Ramesh, 2026-03-16) and archived LWP-1 (Daniel Ortiz, 2025-11-30) have similar titles",
        "matching_issues_initial": initial,
        "matching_issues_final": final,
        "issues_unchanged": initial == final,
    }
