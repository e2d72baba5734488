def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    route_sql = "SELECT f.id, a.name AS airline, f.flight_number, o.iata_code AS origin, d.iata_code AS destination, f.departure_time, f.economy_fare, f.status FROM flights f JOIN airlines a ON a.id = f.airline_id JOIN airports o ON o.id = f.origin_airport_id JOIN airports d ON d.id = f.destination_airport_id WHERE o.iata_code = 'SFO' AND d.iata_code IN ('JFK', 'EWR') AND f.departure_time LIKE '2026-04-1%' ORDER BY f.economy_fare"
    options = _rows(final_db_path, route_sql)
    exact = [f for f in options if f["destination"] == "JFK" and f["departure_time"].startswith("2026-04-10")]
    return {
        "task": "read-only: cheapest economy SFO->JFK flight on 2026-04-10 (flight number and departure time must be in the final answer)",
        "expected_answer": exact[0] if exact else None,
        "all_sfo_new_york_flights_around_date": options,
        "flight_bookings_count_before": _rows(initial_db_path, "SELECT COUNT(*) AS n FROM flight_bookings")[0]["n"],
        "flight_bookings_count_after": _rows(final_db_path, "SELECT COUNT(*) AS n FROM flight_bookings")[0]["n"],
        "note": "AB714 to EWR (199) and PC330 on 2026-04-11 (219) are distractors; the correct answer is the cheapest JFK flight on 2026-04-10.",
    }
