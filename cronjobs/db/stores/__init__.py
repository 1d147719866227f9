"""A store per concept, on the shared session (cronjobs.db.session); see cronjobs.db.store."""
