"""Service settings: environment variables with the PLANNER_ prefix (or a .env file)."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PLANNER_", env_file=".env",
                                      env_ignore_empty=True, extra="ignore")

    database_url: str = Field("sqlite:///./planner.db", description="SQLAlchemy URL: SQLite "
                              "file (default) or postgresql+psycopg://user:pass@host/db.")
    api_token: SecretStr | None = Field(None, description="When set, writes need "
                                        "'Authorization: Bearer <token>'.")
    protect_reads: bool = Field(False, description="Also require the token for reads.")
    max_body_bytes: int = Field(1_000_000, ge=1024, description="Larger bodies get 413.")
    max_concurrent_solves: int = Field(2, ge=1, description="Plan searches run at once; "
                                       "more wait their turn off the event loop.")
    max_concurrent_jobs: int = Field(1, ge=1, description="Background jobs run at once.")
    job_lease_s: float = Field(30.0, ge=1.0, le=3600.0, description="How long a running "
                               "job's process may go without a heartbeat (sent every third "
                               "of it) before another process retries or fails the job.")
    job_max_attempts: int = Field(2, ge=1, le=10, description="Runs a job gets when the "
                                  "process running it stops (an infrastructure failure; bad "
                                  "input is never retried).")
    run_jobs: bool = Field(True, description="This process runs queued jobs (the embedded "
                           "default: one process does everything). False on API replicas "
                           "whose jobs run in separate `planner worker` processes.")
    job_poll_s: float = Field(1.0, ge=0.05, le=60.0, description="How often a process that "
                              "runs jobs looks for queued ones it was not told about "
                              "(PostgreSQL notifies workers of new jobs; this is the "
                              "fallback).")
    max_time_limit_ms: int = Field(60_000, ge=1, description="Cap on a request's "
                                   "search.time_limit_ms.")
    allow_local_sweeps: bool = Field(True, description="Let calibration sweeps and validation "
                                     "probes run torch.distributed jobs (torchrun) here.")
    data_dir: str = Field("./planner-data", description="Where measured traces are kept.")
