def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    room = _rows(final_db_path, "SELECT rm.id, rm.nightly_rate FROM hotel_rooms rm JOIN hotels h ON h.id = rm.hotel_id WHERE h.name = 'Casa Alfama Boutique Hotel' AND h.city = 'Lisbon' AND rm.room_type = 'Superior Double'")
    trip = _rows(final_db_path, "SELECT id FROM trips WHERE user_id = 1 AND name = 'Lisbon Spring Getaway'")
    if len(room) != 1 or len(trip) != 1:
        return {"result": "others"}
    room_id, rate = room[0]
    trip_id = trip[0][0]
    before_ids = {r[0] for r in _rows(initial_db_path, "SELECT id FROM hotel_reservations")}
    new = [r for r in _rows(final_db_path, "SELECT id, user_id, trip_id, room_id, check_in_date, check_out_date, num_guests, num_rooms, status, total_price FROM hotel_reservations WHERE user_id = 1") if r[0] not in before_ids and r[8] != "cancelled"]
    if len(new) != 1:
        return {"result": "others"}
    _id, _user, r_trip, r_room, check_in, check_out, guests, rooms, _status, total = new[0]
    if r_room != room_id or r_trip != trip_id:
        return {"result": "others"}
    if check_in != "2026-05-12" or check_out != "2026-05-15" or guests != 2 or rooms != 1:
        return {"result": "others"}
    if abs((total or 0) - rate * 3) > 0.01:
        return {"result": "others"}
    return {"result": "complete"}
