def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _query(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    branch = _query(initial_db_path, "SELECT id FROM branches WHERE name = 'Eastside Branch'")
    target = _query(initial_db_path, "SELECT h.id, h.pickup_branch_id FROM holds h JOIN titles t ON t.id = h.title_id "
                                     "WHERE h.member_id = 1 AND t.title = 'Paper Moons' AND h.status IN ('waiting', 'ready')")
    if len(branch) != 1 or len(target) != 1:
        return {"result": "others"}
    eastside_id = branch[0][0]
    hold_id, pickup_before = target[0]
    if pickup_before == eastside_id:
        return {"result": "others"}
    after = _query(final_db_path, "SELECT pickup_branch_id, status, title_id, member_id FROM holds WHERE id = ?", (hold_id,))
    if len(after) != 1:
        return {"result": "others"}
    pickup_after, status_after, _title, member_after = after[0]
    if pickup_after != eastside_id or status_after not in ("waiting", "ready") or member_after != 1:
        return {"result": "others"}
    others_before = _query(initial_db_path, "SELECT id, title_id, member_id, pickup_branch_id, status FROM holds WHERE id != ? ORDER BY id", (hold_id,))
    others_after = _query(final_db_path, "SELECT id, title_id, member_id, pickup_branch_id, status FROM holds WHERE id != ? ORDER BY id", (hold_id,))
    if others_before != others_after:
        return {"result": "others"}
    return {"result": "complete"}
