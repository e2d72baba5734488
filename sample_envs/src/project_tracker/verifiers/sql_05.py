def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _logs(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            cur = conn.execute("SELECT t.id, i.issue_key, i.title, t.user_id, t.minutes, t.work_date, t.note FROM time_logs t "
                               "JOIN issues i ON i.id = t.issue_id ORDER BY t.id")
            return [dict(zip([d[0] for d in cur.description], r)) for r in cur.fetchall()]
        finally:
            conn.close()

    initial = _logs(initial_db_path)
    final = _logs(final_db_path)
    initial_ids = {r["id"] for r in initial}
    return {
        "expected": {"issue_key": "WEB-5", "user_id": 1, "minutes": 135, "work_date": "2026-03-10",
                     "note": "Reworked tab index and added skip link"},
        "time_log_count_initial": len(initial),
        "time_log_count_final": len(final),
        "new_time_logs": [r for r in final if r["id"] not in initial_ids],
        "removed_time_log_ids": sorted(initial_ids - {r["id"] for r in final}),
    }
