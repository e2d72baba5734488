def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = "SELECT r.id, r.user_id, h.name AS hotel, h.city, r.confirmation_code, r.check_in_date, r.check_out_date, r.total_price, r.status FROM hotel_reservations r JOIN hotel_rooms rm ON rm.id = r.room_id JOIN hotels h ON h.id = rm.hotel_id WHERE h.name = 'Grand Meridian Hotel' ORDER BY r.id"
    before = _rows(initial_db_path, sql)
    after = _rows(final_db_path, sql)
    target = [r for r in after if r["user_id"] == 1 and r["city"] == "New York"]
    return {
        "task": "read-only: confirmation code and total price of user 1's Grand Meridian Hotel New York reservation must appear in the final answer",
        "expected_answer": {"confirmation_code": target[0]["confirmation_code"], "total_price": target[0]["total_price"]} if target else None,
        "distractors": "GMC-77310 is user 1's Grand Meridian Chicago stay; GMN-40388 belongs to user 2",
        "grand_meridian_reservations_before": before,
        "grand_meridian_reservations_after": after,
        "unchanged": before == after,
    }
