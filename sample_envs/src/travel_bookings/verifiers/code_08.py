def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    booking = _rows(final_db_path, "SELECT b.id FROM flight_bookings b JOIN flights f ON f.id = b.flight_id JOIN airlines a ON a.id = f.airline_id WHERE b.user_id = 1 AND f.flight_number = 'NW310' AND a.name = 'Northwind Airlines' AND f.departure_time LIKE '2026-07-11%' AND b.status != 'cancelled'")
    if len(booking) != 1:
        return {"result": "others"}
    booking_id = booking[0][0]
    before_ids = {r[0] for r in _rows(initial_db_path, "SELECT id FROM passengers")}
    new = [r for r in _rows(final_db_path, "SELECT id, booking_id, first_name, last_name, date_of_birth, passport_number, meal_preference FROM passengers") if r[0] not in before_ids]
    if len(new) != 1:
        return {"result": "others"}
    _id, b_id, first, last, dob, passport, meal = new[0]
    if b_id != booking_id:
        return {"result": "others"}
    if first.strip().lower() != "leo" or last.strip().lower() != "chen" or dob != "2015-09-03":
        return {"result": "others"}
    if (passport or "").strip().upper() != "X2468135" or meal != "child":
        return {"result": "others"}
    status_before = _rows(initial_db_path, "SELECT status FROM flight_bookings WHERE id = ?", (booking_id,))
    status_after = _rows(final_db_path, "SELECT status FROM flight_bookings WHERE id = ?", (booking_id,))
    if status_before != status_after:
        return {"result": "others"}
    return {"result": "complete"}
