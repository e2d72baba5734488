def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _state(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            labels = {r[0] for r in conn.execute("SELECT il.label_id FROM issue_labels il JOIN issues i ON i.id = il.issue_id "
                                                  "WHERE i.issue_key = 'MOB-4'").fetchall()}
            comments = conn.execute("SELECT c.id, c.author_id, c.body FROM comments c JOIN issues i ON i.id = c.issue_id "
                                    "WHERE i.issue_key = 'MOB-4' ORDER BY c.id").fetchall()
            return labels, comments
        finally:
            conn.close()

    labels_before, comments_before = _state(initial_db_path)
    labels_after, comments_after = _state(final_db_path)
    if 8 in labels_before or 8 not in labels_after:
        return {"result": "others"}
    if labels_after - labels_before != {8} or not labels_before <= labels_after:
        return {"result": "others"}
    before_ids = {c[0] for c in comments_before}
    target = "profiling shows image decoding on the main thread"
    new_ok = [c for c in comments_after if c[0] not in before_ids and c[1] == 1
              and re.sub(r"[^a-z0-9]+", " ", (c[2] or "").lower()).strip() == target]
    if len(new_ok) != 1:
        return {"result": "others"}
    return {"result": "complete"}
