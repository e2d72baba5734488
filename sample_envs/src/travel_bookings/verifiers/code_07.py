def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import re
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    answer = final_answer or ""
    if not answer.strip():
        return {"result": "others"}
    sql = "SELECT r.id, r.confirmation_code, r.total_price, r.status FROM hotel_reservations r JOIN hotel_rooms rm ON rm.id = r.room_id JOIN hotels h ON h.id = rm.hotel_id WHERE r.user_id = 1 AND h.name = 'Grand Meridian Hotel' AND h.city = 'New York'"
    initial = _rows(initial_db_path, sql)
    final = _rows(final_db_path, sql)
    if len(initial) != 1 or initial != final:
        return {"result": "others"}
    _id, code, total, _status = initial[0]
    compact = re.sub(r"[\s\-_]", "", answer).upper()
    if re.sub(r"[\s\-_]", "", code).upper() not in compact:
        return {"result": "others"}
    normalized = re.sub(r"(?<=\d)[,\s\u202f\u00a0'](?=\d{3}(?!\d))", "", answer)
    amounts = [float(m) for m in re.findall(r"(?<![\d.])(\d+(?:\.\d+)?)", normalized)]
    if not any(abs(a - total) < 0.005 for a in amounts):
        return {"result": "others"}
    return {"result": "complete"}
