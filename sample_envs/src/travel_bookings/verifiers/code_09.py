def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    target = _rows(final_db_path, "SELECT r.id, r.total_price FROM hotel_reservations r JOIN hotel_rooms rm ON rm.id = r.room_id JOIN hotels h ON h.id = rm.hotel_id WHERE r.user_id = 1 AND h.name = 'Grand Meridian Hotel' AND h.city = 'Chicago' AND r.status != 'cancelled'")
    if len(target) != 1:
        return {"result": "others"}
    reservation_id, total = target[0]
    before_ids = {r[0] for r in _rows(initial_db_path, "SELECT id FROM payments")}
    new = [r for r in _rows(final_db_path, "SELECT id, user_id, flight_booking_id, hotel_reservation_id, amount, method, status FROM payments") if r[0] not in before_ids]
    if len(new) != 1:
        return {"result": "others"}
    _id, user_id, fb_id, hr_id, amount, method, status = new[0]
    if user_id != 1 or hr_id != reservation_id or fb_id is not None:
        return {"result": "others"}
    if method != "paypal" or status != "completed" or abs(amount - total) > 0.01:
        return {"result": "others"}
    paid_before = _rows(initial_db_path, "SELECT COUNT(*) FROM payments WHERE hotel_reservation_id = ? AND status = 'completed'", (reservation_id,))[0][0]
    if paid_before:
        return {"result": "others"}
    return {"result": "complete"}
