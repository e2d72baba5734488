def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    bsql = "SELECT b.id, b.user_id, b.booking_reference, f.flight_number, f.departure_time, b.status, b.total_price, f.seats_available FROM flight_bookings b JOIN flights f ON f.id = b.flight_id WHERE f.flight_number = 'NW310' ORDER BY b.id"
    psql = "SELECT id, booking_id, first_name, last_name, date_of_birth, passport_number, seat_number, meal_preference, checked_bags FROM passengers ORDER BY id"
    before_p = _rows(initial_db_path, psql)
    after_p = _rows(final_db_path, psql)
    before_ids = {r["id"] for r in before_p}
    return {
        "expected": "new passenger Leo Chen (2015-09-03, passport X2468135, meal 'child') on user 1's booking NW9K3D (Northwind NW310, 2026-07-11); not on user 4's HB8C4U or any other booking",
        "nw310_bookings_before": _rows(initial_db_path, bsql),
        "nw310_bookings_after": _rows(final_db_path, bsql),
        "new_passengers": [r for r in after_p if r["id"] not in before_ids],
        "passenger_count_before": len(before_p),
        "passenger_count_after": len(after_p),
    }
