def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    flight = _rows(final_db_path, "SELECT f.id FROM flights f JOIN airlines a ON a.id = f.airline_id WHERE f.flight_number = 'AU482' AND a.name = 'Aurora Airways' AND f.departure_time LIKE '2026-05-12%'")
    trip = _rows(final_db_path, "SELECT id FROM trips WHERE user_id = 1 AND name = 'Lisbon Spring Getaway'")
    if len(flight) != 1 or len(trip) != 1:
        return {"result": "others"}
    flight_id, trip_id = flight[0][0], trip[0][0]
    before_ids = {r[0] for r in _rows(initial_db_path, "SELECT id FROM flight_bookings")}
    new = [r for r in _rows(final_db_path, "SELECT id, user_id, trip_id, flight_id, cabin_class, status FROM flight_bookings") if r[0] not in before_ids]
    on_flight = [r for r in new if r[1] == 1 and r[3] == flight_id and r[5] != "cancelled"]
    if len(on_flight) != 1:
        return {"result": "others"}
    booking_id, _user, b_trip, _flight, cabin, _status = on_flight[0]
    if b_trip != trip_id or cabin != "economy":
        return {"result": "others"}
    passengers = _rows(final_db_path, "SELECT first_name, last_name, date_of_birth, passport_number FROM passengers WHERE booking_id = ?", (booking_id,))
    if len(passengers) != 1:
        return {"result": "others"}
    first, last, dob, passport = passengers[0]
    if first.strip().lower() != "maya" or last.strip().lower() != "chen" or dob != "1990-06-14":
        return {"result": "others"}
    if (passport or "").strip().upper() != "X1234567":
        return {"result": "others"}
    if any(r[3] != flight_id and r[1] == 1 and r[5] != "cancelled" for r in new):
        return {"result": "others"}
    return {"result": "complete"}
