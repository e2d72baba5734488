def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    sql = "SELECT id, name, start_date, end_date, notes, status FROM trips WHERE user_id = 1 AND lower(trim(name)) = 'kyoto autumn escape'"
    before_ids = {r[0] for r in _rows(initial_db_path, sql)}
    new = [r for r in _rows(final_db_path, sql) if r[0] not in before_ids]
    if len(new) != 1:
        return {"result": "others"}
    _id, _name, start, end, notes, status = new[0]
    if start != "2026-10-03" or end != "2026-10-12":
        return {"result": "others"}
    if "temple visits and fall foliage" not in (notes or "").lower():
        return {"result": "others"}
    if status == "cancelled":
        return {"result": "others"}
    return {"result": "complete"}
