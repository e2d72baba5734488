def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    appt_sql = ("SELECT a.id, p.first_name || ' ' || p.last_name AS provider_name, a.slot_id, a.status, a.scheduled_start, a.scheduled_end, a.reason "
                "FROM appointments a JOIN providers p ON p.id = a.provider_id WHERE a.user_id = 1 ORDER BY a.id")
    slot_sql = ("SELECT s.id, p.first_name || ' ' || p.last_name AS provider_name, s.start_time, s.is_booked FROM appointment_slots s "
                "JOIN providers p ON p.id = s.provider_id WHERE s.start_time LIKE '2026-04-20%' OR s.start_time LIKE '2026-04-22%' ORDER BY s.id")
    return {
        "expected": {"appointment": "user 1 with Helen Vasquez on 2026-04-20 10:00", "move_to": "Helen Vasquez slot 2026-04-22 14:00", "old_slot_should_be_free": True},
        "user1_appointments_initial": _fetch(initial_db_path, appt_sql),
        "user1_appointments_final": _fetch(final_db_path, appt_sql),
        "slots_initial": _fetch(initial_db_path, slot_sql),
        "slots_final": _fetch(final_db_path, slot_sql),
    }
