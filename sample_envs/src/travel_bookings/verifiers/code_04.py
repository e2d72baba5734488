def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    sql = "SELECT r.id, r.status, h.name, h.city, r.check_in_date FROM hotel_reservations r JOIN hotel_rooms rm ON rm.id = r.room_id JOIN hotels h ON h.id = rm.hotel_id WHERE r.user_id = 1 ORDER BY r.id"
    before = {r[0]: r for r in _rows(initial_db_path, sql)}
    after = {r[0]: r for r in _rows(final_db_path, sql)}
    targets = [rid for rid, r in before.items() if r[2] == "Seaside Palms Resort" and r[3] == "Cancun" and r[4] == "2026-06-20"]
    if len(targets) != 1:
        return {"result": "others"}
    target = targets[0]
    if before[target][1] == "cancelled" or target not in after or after[target][1] != "cancelled":
        return {"result": "others"}
    for rid, row in before.items():
        if rid != target and (rid not in after or after[rid][1] != row[1]):
            return {"result": "others"}
    return {"result": "complete"}
