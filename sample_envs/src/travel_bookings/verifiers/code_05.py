def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    sql = "SELECT p.id, b.booking_reference, p.first_name, p.last_name, p.seat_number, p.meal_preference, p.checked_bags, p.passport_number FROM passengers p JOIN flight_bookings b ON b.id = p.booking_id ORDER BY p.id"
    before = {r[0]: r for r in _rows(initial_db_path, sql)}
    after = {r[0]: r for r in _rows(final_db_path, sql)}
    targets = [pid for pid, r in before.items() if r[1] == "QX7B2M" and r[2] == "Daniel" and r[3] == "Chen"]
    if len(targets) != 1:
        return {"result": "others"}
    target = targets[0]
    if target not in after:
        return {"result": "others"}
    row = after[target]
    if (row[4] or "").strip().upper() != "14C" or row[5] != "vegetarian":
        return {"result": "others"}
    if (before[target][4] or "").upper() == "14C" and before[target][5] == "vegetarian":
        return {"result": "others"}
    for pid, old in before.items():
        if pid != target and after.get(pid) != old:
            return {"result": "others"}
    return {"result": "complete"}
