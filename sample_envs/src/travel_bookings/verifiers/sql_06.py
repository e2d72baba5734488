def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = "SELECT r.id, r.user_id, r.trip_id, t.name AS trip_name, h.name AS hotel, h.city, rm.room_type, rm.nightly_rate, r.confirmation_code, r.check_in_date, r.check_out_date, r.num_guests, r.num_rooms, r.total_price, r.status FROM hotel_reservations r JOIN hotel_rooms rm ON rm.id = r.room_id JOIN hotels h ON h.id = rm.hotel_id LEFT JOIN trips t ON t.id = r.trip_id ORDER BY r.id"
    before = _rows(initial_db_path, sql)
    after = _rows(final_db_path, sql)
    before_ids = {r["id"] for r in before}
    return {
        "expected": {"user_id": 1, "hotel": "Casa Alfama Boutique Hotel (Lisbon)", "room_type": "Superior Double (room id 6, 189.0/night)", "check_in_date": "2026-05-12", "check_out_date": "2026-05-15", "num_guests": 2, "num_rooms": 1, "trip": "user 1's 'Lisbon Spring Getaway' (trip id 2)", "total_price": 567.0},
        "distractors": "Alfama Riverside Hotel also has a Superior Double; user 2 already holds the same room on the same dates (CAB-55210)",
        "new_reservations": [r for r in after if r["id"] not in before_ids],
        "reservation_count_before": len(before),
        "reservation_count_after": len(after),
    }
