def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = "SELECT r.id, r.user_id, r.confirmation_code, h.name AS hotel, h.city, rm.room_type, r.check_in_date, r.check_out_date, r.status, r.total_price FROM hotel_reservations r JOIN hotel_rooms rm ON rm.id = r.room_id JOIN hotels h ON h.id = rm.hotel_id WHERE r.user_id = 1 ORDER BY r.id"
    psql = "SELECT p.id, p.hotel_reservation_id, p.amount, p.method, p.status FROM payments p JOIN hotel_reservations r ON r.id = p.hotel_reservation_id JOIN hotel_rooms rm ON rm.id = r.room_id JOIN hotels h ON h.id = rm.hotel_id WHERE h.name LIKE 'Seaside Palms%' ORDER BY p.id"
    return {
        "expected": "user 1's Seaside Palms Resort (Cancun) reservation checking in 2026-06-20 (SPR-11842) becomes 'cancelled'; SPR-11907 (2026-08-14) and all other reservations keep their status",
        "user1_reservations_before": _rows(initial_db_path, sql),
        "user1_reservations_after": _rows(final_db_path, sql),
        "seaside_palms_payments_before": _rows(initial_db_path, psql),
        "seaside_palms_payments_after": _rows(final_db_path, psql),
    }
