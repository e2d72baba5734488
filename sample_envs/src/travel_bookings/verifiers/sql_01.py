def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = "SELECT id, user_id, name, start_date, end_date, status, notes, created_at FROM trips ORDER BY id"
    before = _rows(initial_db_path, sql)
    after = _rows(final_db_path, sql)
    before_ids = {r["id"] for r in before}
    return {
        "expected": {"user_id": 1, "name": "Kyoto Autumn Escape", "start_date": "2026-10-03", "end_date": "2026-10-12", "notes": "Temple visits and fall foliage"},
        "trip_count_before": len(before),
        "trip_count_after": len(after),
        "new_trips": [r for r in after if r["id"] not in before_ids],
        "removed_trip_ids": sorted(before_ids - {r["id"] for r in after}),
        "kyoto_trips_after": [r for r in after if "kyoto" in r["name"].lower()],
    }
