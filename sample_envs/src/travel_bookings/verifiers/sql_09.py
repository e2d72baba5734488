def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    psql = "SELECT p.id, p.user_id, p.flight_booking_id, p.hotel_reservation_id, r.confirmation_code, p.amount, p.method, p.status, p.paid_at FROM payments p LEFT JOIN hotel_reservations r ON r.id = p.hotel_reservation_id ORDER BY p.id"
    before = _rows(initial_db_path, psql)
    after = _rows(final_db_path, psql)
    before_ids = {r["id"] for r in before}
    rsql = "SELECT r.id, r.confirmation_code, h.name AS hotel, h.city, r.total_price, r.status FROM hotel_reservations r JOIN hotel_rooms rm ON rm.id = r.room_id JOIN hotels h ON h.id = rm.hotel_id WHERE r.user_id = 1 AND h.name = 'Grand Meridian Hotel'"
    return {
        "expected": "one new completed PayPal payment of 1752.0 by user 1 for reservation GMC-77310 (Grand Meridian Hotel, Chicago); no payment for the New York stay or for the unpaid Seaside Palms stay SPR-11907",
        "user1_grand_meridian_reservations": _rows(final_db_path, rsql),
        "new_payments": [r for r in after if r["id"] not in before_ids],
        "payment_count_before": len(before),
        "payment_count_after": len(after),
    }
