def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _query(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    list_sql = "SELECT id, is_public FROM reading_lists WHERE member_id = 1 AND lower(trim(name)) = 'summer mysteries 2026'"
    if _query(initial_db_path, list_sql):
        return {"result": "others"}
    lists = _query(final_db_path, list_sql)
    if len(lists) != 1:
        return {"result": "others"}
    list_id, is_public = lists[0]
    if is_public not in (0, False):
        return {"result": "others"}
    expected = set()
    for name in ("The Silent Orchard", "Midnight at Fenwick Hall"):
        rows = _query(initial_db_path, "SELECT id FROM titles WHERE title = ? AND format = 'print'", (name,))
        if len(rows) != 1:
            return {"result": "others"}
        expected.add(rows[0][0])
    items = [r[0] for r in _query(final_db_path, "SELECT title_id FROM reading_list_items WHERE reading_list_id = ?", (list_id,))]
    if len(items) != len(expected) or set(items) != expected:
        return {"result": "others"}
    other_before = _query(initial_db_path, "SELECT i.id, i.reading_list_id, i.title_id FROM reading_list_items i JOIN reading_lists r ON r.id = i.reading_list_id WHERE r.member_id != 1 ORDER BY i.id")
    other_after = _query(final_db_path, "SELECT i.id, i.reading_list_id, i.title_id FROM reading_list_items i JOIN reading_lists r ON r.id = i.reading_list_id WHERE r.member_id != 1 ORDER BY i.id")
    if other_before != other_after:
        return {"result": "others"}
    return {"result": "complete"}
