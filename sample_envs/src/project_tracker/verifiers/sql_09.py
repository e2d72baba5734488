def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _state(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            members = [dict(zip(["user_id", "full_name", "role"], r)) for r in conn.execute(
                "SELECT m.user_id, u.full_name, m.role FROM project_members m JOIN users u ON u.id = m.user_id "
                "WHERE m.project_id = 3 ORDER BY m.id").fetchall()]
            issue = conn.execute("SELECT i.issue_key, i.title, i.assignee_id, u.full_name FROM issues i "
                                 "LEFT JOIN users u ON u.id = i.assignee_id WHERE i.issue_key = 'PLAT-1'").fetchone()
            return {"platform_members": members, "plat_1": list(issue) if issue else None}
        finally:
            conn.close()

    return {
        "expected": "Lucas Moreau (user 6) is a 'maintainer' member of Platform Infrastructure (project 3) and PLAT-1 "
                    "'Rotate expiring TLS certificates' is assigned to user 6",
        "initial": _state(initial_db_path),
        "final": _state(final_db_path),
    }
