def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT a.id, p.first_name || ' ' || p.last_name AS provider_name, a.slot_id, a.reason, a.status, a.scheduled_start, "
           "a.cancellation_reason, s.is_booked AS slot_is_booked FROM appointments a JOIN providers p ON p.id = a.provider_id "
           "JOIN appointment_slots s ON s.id = a.slot_id WHERE a.user_id = 1 ORDER BY a.id")
    return {
        "expected": {"provider": "Priya Natarajan", "date": "2026-04-14", "new_status": "cancelled", "cancellation_reason": "Schedule conflict at work", "must_stay_scheduled": "2026-05-12 appointment with Dr. Natarajan"},
        "user1_appointments_initial": _fetch(initial_db_path, sql),
        "user1_appointments_final": _fetch(final_db_path, sql),
    }
