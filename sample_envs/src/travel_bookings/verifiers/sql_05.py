def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = "SELECT p.id, p.booking_id, b.booking_reference, b.user_id, p.first_name, p.last_name, p.seat_number, p.meal_preference, p.checked_bags FROM passengers p JOIN flight_bookings b ON b.id = p.booking_id WHERE p.last_name = 'Chen' ORDER BY p.id"
    before = _rows(initial_db_path, sql)
    after = _rows(final_db_path, sql)
    before_map = {r["id"]: r for r in before}
    changed = [{"before": before_map.get(r["id"]), "after": r} for r in after if before_map.get(r["id"]) != r]
    return {
        "expected": "passenger Daniel Chen on booking QX7B2M: seat 22B -> 14C, meal standard -> vegetarian; Daniel Chen on LM4R8T, NW9K3D and user 4's HB8C4U unchanged",
        "chen_passengers_before": before,
        "chen_passengers_after": after,
        "changed_rows": changed,
    }
