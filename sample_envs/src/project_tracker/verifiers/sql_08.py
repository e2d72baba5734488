def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _comments(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            cur = conn.execute("SELECT c.id, i.issue_key, c.author_id, c.body FROM comments c JOIN issues i ON i.id = c.issue_id "
                               "ORDER BY c.id")
            return [dict(zip(["id", "issue_key", "author_id", "body"], r)) for r in cur.fetchall()]
        finally:
            conn.close()

    initial = _comments(initial_db_path)
    final = _comments(final_db_path)
    final_ids = {c["id"] for c in final}
    initial_ids = {c["id"] for c in initial}
    return {
        "expected": "comment id 2 (user 1 on WEB-3, 'Cannot reproduce on staging, closing soon.') deleted; "
                    "identical text by user 1 on MOB-2 (id 5) and all other comments kept",
        "deleted_comments": [c for c in initial if c["id"] not in final_ids],
        "new_comments": [c for c in final if c["id"] not in initial_ids],
        "comment_count_initial": len(initial),
        "comment_count_final": len(final),
    }
