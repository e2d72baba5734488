def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import re
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    answer = (final_answer or "").lower()
    if not answer.strip():
        return {"result": "others"}
    flights = _rows(final_db_path, "SELECT f.flight_number, f.departure_time, f.economy_fare FROM flights f JOIN airports o ON o.id = f.origin_airport_id JOIN airports d ON d.id = f.destination_airport_id WHERE o.iata_code = 'SFO' AND d.iata_code = 'JFK' AND f.departure_time LIKE '2026-04-10%' AND f.status != 'cancelled' ORDER BY f.economy_fare ASC, f.departure_time ASC")
    if not flights:
        return {"result": "others"}
    number, departure, _fare = flights[0]
    compact = re.sub(r"[\s\-]", "", answer)
    if number.lower() not in compact:
        return {"result": "others"}
    hhmm = departure[11:16]
    hour, minute = int(hhmm[:2]), hhmm[3:5]
    twelve = f"{hour % 12 or 12}:{minute}"
    if hhmm not in answer and not re.search(r"(?<!\d)" + re.escape(twelve) + r"\s*p\.?m", answer):
        return {"result": "others"}
    before = _rows(initial_db_path, "SELECT COUNT(*) FROM flight_bookings")[0][0]
    after = _rows(final_db_path, "SELECT COUNT(*) FROM flight_bookings")[0][0]
    if before != after:
        return {"result": "others"}
    return {"result": "complete"}
