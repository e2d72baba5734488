def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    bsql = "SELECT b.id, b.user_id, b.trip_id, t.name AS trip_name, b.flight_id, f.flight_number, f.departure_time, b.booking_reference, b.cabin_class, b.status, b.total_price FROM flight_bookings b JOIN flights f ON f.id = b.flight_id LEFT JOIN trips t ON t.id = b.trip_id ORDER BY b.id"
    before = _rows(initial_db_path, bsql)
    after = _rows(final_db_path, bsql)
    before_ids = {r["id"] for r in before}
    new = [r for r in after if r["id"] not in before_ids]
    for r in new:
        r["passengers"] = _rows(final_db_path, "SELECT first_name, last_name, date_of_birth, passport_number, seat_number, meal_preference FROM passengers WHERE booking_id = ?", (r["id"],))
    fsql = "SELECT id, flight_number, departure_time, seats_available FROM flights WHERE flight_number = 'AU482' ORDER BY departure_time"
    return {
        "expected": {"flight": "Aurora Airways AU482 departing 2026-05-12 16:05 (flight id 7)", "cabin_class": "economy", "trip": "user 1's 'Lisbon Spring Getaway' (trip id 2, not user 2's trip 6)", "passenger": "Maya Chen, 1990-06-14, X1234567"},
        "new_flight_bookings": new,
        "booking_count_before": len(before),
        "booking_count_after": len(after),
        "au482_flights_before": _rows(initial_db_path, fsql),
        "au482_flights_after": _rows(final_db_path, fsql),
    }
