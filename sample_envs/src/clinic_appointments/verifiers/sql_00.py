def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    slot_sql = ("SELECT s.id, s.provider_id, p.first_name || ' ' || p.last_name AS provider_name, s.start_time, s.end_time, s.is_booked "
                "FROM appointment_slots s JOIN providers p ON p.id = s.provider_id WHERE s.start_time LIKE '2026-04-16%' ORDER BY s.id")
    appt_sql = ("SELECT a.id, a.provider_id, p.first_name || ' ' || p.last_name AS provider_name, a.slot_id, a.appointment_type, a.reason, a.status, "
                "a.scheduled_start, a.insurance_policy_id, i.carrier_name, i.plan_name FROM appointments a JOIN providers p ON p.id = a.provider_id "
                "LEFT JOIN insurance_policies i ON i.id = a.insurance_policy_id WHERE a.user_id = 1 ORDER BY a.id")
    initial_appts = _fetch(initial_db_path, appt_sql)
    final_appts = _fetch(final_db_path, appt_sql)
    initial_ids = {a["id"] for a in initial_appts}
    return {
        "expected": {"provider": "Marcus Oyelaran", "start": "2026-04-16 10:30", "reason": "Skin rash follow-up", "appointment_type": "in_person", "insurance": "Blue Harbor Health Gold HMO 500"},
        "slots_on_2026_04_16_initial": _fetch(initial_db_path, slot_sql),
        "slots_on_2026_04_16_final": _fetch(final_db_path, slot_sql),
        "new_user1_appointments": [a for a in final_appts if a["id"] not in initial_ids],
        "user1_appointment_count": {"initial": len(initial_appts), "final": len(final_appts)},
        "user1_policies": _fetch(final_db_path, "SELECT id, carrier_name, plan_name, status FROM insurance_policies WHERE user_id = 1 ORDER BY id"),
    }
