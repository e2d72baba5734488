def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _query(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    target = _query(initial_db_path, "SELECT h.id FROM holds h JOIN titles t ON t.id = h.title_id WHERE h.member_id = 1 "
                                     "AND t.title = 'Winter at Greystone' AND t.format = 'print' AND h.status IN ('waiting', 'ready')")
    if len(target) != 1:
        return {"result": "others"}
    hold_id = target[0][0]
    after = _query(final_db_path, "SELECT status FROM holds WHERE id = ?", (hold_id,))
    if len(after) != 1 or after[0][0] != "cancelled":
        return {"result": "others"}
    others_before = _query(initial_db_path, "SELECT id, title_id, member_id, pickup_branch_id, status FROM holds WHERE id != ? ORDER BY id", (hold_id,))
    others_after = _query(final_db_path, "SELECT id, title_id, member_id, pickup_branch_id, status FROM holds WHERE id != ? ORDER BY id", (hold_id,))
    if others_before != others_after:
        return {"result": "others"}
    return {"result": "complete"}
