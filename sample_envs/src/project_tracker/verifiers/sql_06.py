def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _state(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            labels = [dict(zip(["label_id", "label", "label_project"], r)) for r in conn.execute(
                "SELECT l.id, l.name, p.name FROM issue_labels il JOIN issues i ON i.id = il.issue_id "
                "JOIN labels l ON l.id = il.label_id JOIN projects p ON p.id = l.project_id WHERE i.issue_key = 'MOB-4' "
                "ORDER BY l.id").fetchall()]
            comments = [dict(zip(["id", "author_id", "body", "created_at"], r)) for r in conn.execute(
                "SELECT c.id, c.author_id, c.body, c.created_at FROM comments c JOIN issues i ON i.id = c.issue_id "
                "WHERE i.issue_key = 'MOB-4' ORDER BY c.id").fetchall()]
            link_count = conn.execute("SELECT COUNT(*) FROM issue_labels").fetchone()[0]
            return {"labels": labels, "comments": comments, "total_issue_label_links": link_count}
        finally:
            conn.close()

    return {
        "expected": {"issue_key": "MOB-4", "label": "performance of Mobile App (label id 8, not WEB id 4 or PLAT id 12)",
                     "comment_by_user_1": "Profiling shows image decoding on the main thread."},
        "initial": _state(initial_db_path),
        "final": _state(final_db_path),
    }
