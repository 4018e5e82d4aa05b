"""Plans on disk: SQLAlchemy 2 over SQLite (default, WAL) or any other URL (PostgreSQL).

The plan is stored as the exact JSON text the service answered with, so a plan read back after a
restart is the same bytes. The schema is owned by the Alembic migrations in ``api/migrations``;
``migrate()`` applies them (at start-up, or by hand with ``alembic -c api/alembic.ini upgrade head``).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import DateTime, Float, Integer, MetaData, String, Text, create_engine, event, func, insert, select, update
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.pool import StaticPool

ALEMBIC_INI = Path(__file__).resolve().parent / "alembic.ini"
SQLITE_BUSY_TIMEOUT_MS = 5_000


class Base(DeclarativeBase):
    # named constraints, so migrations and the models agree on names on every database
    metadata = MetaData(naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    })


class PlanRow(Base):
    """One answered ``POST /v1/plans``: the request, the plan text as answered, and what lists need."""

    __tablename__ = "plans"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(36), unique=True, nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), index=True, nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    model: Mapped[str] = mapped_column(String(64), nullable=False)
    objective: Mapped[str] = mapped_column(String(16), nullable=False)
    solver: Mapped[str] = mapped_column(String(16), nullable=False)
    engine: Mapped[str] = mapped_column(String(16), nullable=False)
    time_limit_s: Mapped[float] = mapped_column(Float, nullable=False)
    solve_time_s: Mapped[float] = mapped_column(Float, nullable=False)
    goodput_scale: Mapped[float] = mapped_column(Float, nullable=False)
    devices: Mapped[int] = mapped_column(Integer, nullable=False)
    power_kw: Mapped[float] = mapped_column(Float, nullable=False)
    request_json: Mapped[str] = mapped_column(Text, nullable=False)
    plan_json: Mapped[str] = mapped_column(Text, nullable=False)


@dataclass(frozen=True)
class NewPlan:
    """What a route hands the store: the request (options and workload) and the plan's JSON text."""

    request_json: str
    plan_json: str
    solver: str
    time_limit_s: float


def create_db_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and cross-thread connections."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    in_memory = parsed.database in (None, "", ":memory:")
    engine = create_engine(
        parsed,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        **({"poolclass": StaticPool} if in_memory else {}),
    )

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record) -> None:  # every new connection, not only the first
        cursor = dbapi_connection.cursor()
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            cursor.execute("PRAGMA synchronous=NORMAL")  # safe with WAL, fewer fsyncs
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")  # wait, not 'database is locked'
        cursor.close()

    return engine


def migrate(engine: Engine) -> None:
    """Bring the database to the newest Alembic revision (idempotent)."""
    from alembic import command
    from alembic.config import Config

    config = Config(str(ALEMBIC_INI))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def as_utc(value: dt.datetime) -> dt.datetime:
    """SQLite hands datetimes back naive (they were stored as UTC); PostgreSQL in the session's zone."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def timestamp(value: dt.datetime) -> str:
    """RFC 3339 with microseconds and ``Z``: the same text before and after a round trip."""
    return as_utc(value).isoformat(timespec="microseconds").replace("+00:00", "Z")


def new_id() -> str:
    """A UUID whose first 48 bits are the Unix time in ms (UUIDv7 layout): ids sort by creation."""
    millis = int(utc_now().timestamp() * 1000)
    raw = bytearray(millis.to_bytes(6, "big") + uuid.uuid4().bytes[6:])
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


def record_json(row: PlanRow) -> str:
    """The response body of a stored plan: envelope fields, then the plan text exactly as stored."""
    head = json.dumps({"id": row.id, "created_at": timestamp(row.created_at), "status": row.status,
                       "solver": row.solver, "engine": row.engine, "time_limit_s": row.time_limit_s,
                       "solve_time_s": row.solve_time_s}, separators=(",", ":"))
    return f'{head[:-1]},"plan":{row.plan_json}}}'


class PlanStore:
    """Plans by id, newest first; one short transaction per call (safe from any thread)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._ready = False
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str) -> PlanStore:
        return cls(create_db_engine(url))

    @property
    def ready(self) -> bool:
        """True once ``ensure_schema`` succeeded (later outages surface as OperationalError: 503)."""
        return self._ready

    def ensure_schema(self, auto_migrate: bool) -> None:
        """Migrate when allowed and check the table is there, once; raises while the database is not usable."""
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                if auto_migrate:
                    migrate(self.engine)
                self.ping()
                self._ready = True

    def ping(self) -> None:
        """Raise unless the database answers and holds the plans table."""
        with self.engine.connect() as connection:
            connection.execute(select(PlanRow.seq).limit(1)).all()

    def probe_write(self) -> None:
        """Raise unless the database takes a write: a row inserted in a transaction that is rolled back."""
        with self.engine.connect() as connection:
            with connection.begin() as transaction:
                connection.execute(insert(StudyRow).values(
                    id=str(uuid.uuid4()), name="readyz", created_at=utc_now(), updated_at=utc_now(), status="probe", done=0,
                    total=0, spec_json="{}", output_dir=""))
                transaction.rollback()

    def add(self, new: NewPlan, plan_id: str | None = None) -> PlanRow:
        """Store a plan under a new id (or ``plan_id``: the id of the plan job that made it)."""
        plan = json.loads(new.plan_json)
        row = PlanRow(
            id=plan_id or new_id(), created_at=utc_now(), status=plan["status"], model=plan["model"],
            objective=plan["objective"], solver=new.solver, engine=plan["solver"]["engine"],
            time_limit_s=new.time_limit_s, solve_time_s=plan["solver"]["time_s"],
            goodput_scale=plan["goodput_scale"], devices=plan["totals"]["devices"],
            power_kw=plan["totals"]["power_kw"], request_json=new.request_json, plan_json=new.plan_json,
        )
        with self._sessions.begin() as session:
            session.add(row)
        # the row as a fresh read returns it (datetime precision and zone of this database)
        return self.get(row.id) or row

    def get(self, plan_id: str) -> PlanRow | None:
        with Session(self.engine, expire_on_commit=False) as session:
            return session.scalars(select(PlanRow).where(PlanRow.id == plan_id)).one_or_none()

    def page(self, limit: int, offset: int, status: str | None = None, model: str | None = None) -> tuple[list[PlanRow], int]:
        """Rows newest first (``created_at``, then insertion order), and how many match in all."""
        where = []
        if status is not None:
            where.append(PlanRow.status == status)
        if model is not None:
            where.append(PlanRow.model == model)
        with Session(self.engine) as session:
            total = session.scalar(select(func.count()).select_from(PlanRow).where(*where)) or 0
            rows = session.scalars(
                select(PlanRow).where(*where).order_by(PlanRow.created_at.desc(), PlanRow.seq.desc())
                .limit(limit).offset(offset)
            ).all()
        return list(rows), int(total)

    def dialect(self) -> str:
        return self.engine.dialect.name

    def dispose(self) -> None:
        self.engine.dispose()


def database_label(url: str) -> str:
    """The URL with its password hidden (for logs)."""
    return make_url(url).render_as_string(hide_password=True)



# ------------------------------------------------------------------------------------------- studies
#: study states; the last four are final
STUDY_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")


class StudyRow(Base):
    """One ``POST /v1/studies``: the spec, where the job is, and the folder its outputs and journal live in."""

    __tablename__ = "studies"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(36), unique=True, nullable=False)
    name: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), index=True, nullable=False)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    status: Mapped[str] = mapped_column(String(16), index=True, nullable=False)
    done: Mapped[int] = mapped_column(Integer, nullable=False)
    total: Mapped[int] = mapped_column(Integer, nullable=False)
    spec_json: Mapped[str] = mapped_column(Text, nullable=False)
    output_dir: Mapped[str] = mapped_column(Text, nullable=False)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class StudyStore:
    """Studies by id; every status change is a conditional UPDATE (``from_``), so a cancel and the job
    finishing can race without one overwriting the other. Shares the plan store's engine and schema."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def add(self, study_id: str, name: str, spec_json: str, total: int, output_dir: str) -> StudyRow:
        now = utc_now()
        row = StudyRow(id=study_id, name=name, created_at=now, updated_at=now, status="queued", done=0, total=total,
                       spec_json=spec_json, output_dir=output_dir, error=None)
        with self._sessions.begin() as session:
            session.add(row)
        return self.get(study_id) or row

    def get(self, study_id: str) -> StudyRow | None:
        with Session(self.engine, expire_on_commit=False) as session:
            return session.scalars(select(StudyRow).where(StudyRow.id == study_id)).one_or_none()

    def transition(self, study_id: str, status: str, from_: tuple[str, ...], error: str | None = None,
                   done: int | None = None, clear_error: bool = False) -> bool:
        """Set ``status`` when the study is in one of ``from_``; True when it was. ``error`` replaces the
        study's error; ``clear_error`` removes it (a study resumed is no longer failed or interrupted)."""
        values: dict = {"status": status, "updated_at": utc_now()}
        if error is not None or clear_error:
            values["error"] = error
        if done is not None:
            values["done"] = done
        with self._sessions.begin() as session:
            result = session.execute(update(StudyRow).where(StudyRow.id == study_id, StudyRow.status.in_(from_))
                                     .values(**values))
        return result.rowcount == 1

    def progress(self, study_id: str, done: int) -> None:
        with self._sessions.begin() as session:
            session.execute(update(StudyRow).where(StudyRow.id == study_id).values(done=done, updated_at=utc_now()))

    def page(self, limit: int, offset: int) -> tuple[list[StudyRow], int]:
        """Studies newest first (``created_at``, then insertion order), and how many there are."""
        with Session(self.engine) as session:
            total = session.scalar(select(func.count()).select_from(StudyRow)) or 0
            rows = session.scalars(select(StudyRow).order_by(StudyRow.created_at.desc(), StudyRow.seq.desc())
                                   .limit(limit).offset(offset)).all()
        return list(rows), int(total)

    def with_status(self, statuses: tuple[str, ...]) -> list[StudyRow]:
        """Studies in one of ``statuses``, oldest first (at start-up: what a previous process left unfinished)."""
        with Session(self.engine, expire_on_commit=False) as session:
            return list(session.scalars(select(StudyRow).where(StudyRow.status.in_(statuses))
                                        .order_by(StudyRow.seq)).all())


# ----------------------------------------------------------------------------------------- plan jobs
class PlanJobRow(Base):
    """One ``POST /v1/plans`` answered 202: the request, where the job is, how far it got. Its plan, once there
    is one, is the ``plans`` row with the same id. ``state`` (queued, running, done, cancelled, failed) is where
    the job is, never the solve's outcome: that is the plan's ``status`` (optimal, feasible, time_limit, infeasible)."""

    __tablename__ = "plan_jobs"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(36), unique=True, nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    state: Mapped[str] = mapped_column(String(16), index=True, nullable=False)
    stage: Mapped[str | None] = mapped_column(String(16), nullable=True)
    progress_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    solver: Mapped[str] = mapped_column(String(16), nullable=False)
    time_limit_s: Mapped[float] = mapped_column(Float, nullable=False)
    request_json: Mapped[str] = mapped_column(Text, nullable=False)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class PlanJobStore:
    """Plan jobs by id; every state change is a conditional UPDATE (``from_``), as for studies."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def add(self, job_id: str, solver: str, time_limit_s: float, request_json: str) -> PlanJobRow:
        now = utc_now()
        row = PlanJobRow(id=job_id, created_at=now, updated_at=now, state="queued", stage=None, progress_json=None,
                         solver=solver, time_limit_s=time_limit_s, request_json=request_json, error=None)
        with self._sessions.begin() as session:
            session.add(row)
        return self.get(job_id) or row

    def get(self, job_id: str) -> PlanJobRow | None:
        with Session(self.engine, expire_on_commit=False) as session:
            return session.scalars(select(PlanJobRow).where(PlanJobRow.id == job_id)).one_or_none()

    def transition(self, job_id: str, state: str, from_: tuple[str, ...], error: str | None = None) -> bool:
        """Set ``state`` (and ``error``) when the job is in one of ``from_``; True when it was."""
        with self._sessions.begin() as session:
            result = session.execute(update(PlanJobRow).where(PlanJobRow.id == job_id, PlanJobRow.state.in_(from_))
                                     .values(state=state, error=error, updated_at=utc_now()))
        return result.rowcount == 1

    def progress(self, job_id: str, stage: str, progress_json: str) -> None:
        """Record the stage a running job reached (a job no longer running keeps what it had)."""
        with self._sessions.begin() as session:
            session.execute(update(PlanJobRow).where(PlanJobRow.id == job_id, PlanJobRow.state == "running")
                            .values(stage=stage, progress_json=progress_json, updated_at=utc_now()))

    def with_state(self, states: tuple[str, ...]) -> list[str]:
        """Ids of the jobs in one of ``states``, oldest first."""
        with Session(self.engine) as session:
            return list(session.scalars(select(PlanJobRow.id).where(PlanJobRow.state.in_(states))
                                        .order_by(PlanJobRow.seq)).all())


# ----------------------------------------------------------------------------------------- simulations
class SimulationRow(Base):
    """One ``POST /v1/plans/{id}/simulate``: the plan it replays, its options, where the job is, and once done the
    simulation (the exact JSON text answered). ``state``: queued, running, done, cancelled or failed."""

    __tablename__ = "simulations"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(36), unique=True, nullable=False)
    plan_id: Mapped[str] = mapped_column(String(36), index=True, nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    state: Mapped[str] = mapped_column(String(16), index=True, nullable=False)
    options_json: Mapped[str] = mapped_column(Text, nullable=False)
    result_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class SimulationStore:
    """Simulation jobs by id; every state change is a conditional UPDATE (``from_``), as for plan jobs."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def add(self, sim_id: str, plan_id: str, options_json: str) -> SimulationRow:
        now = utc_now()
        row = SimulationRow(id=sim_id, plan_id=plan_id, created_at=now, updated_at=now, state="queued",
                            options_json=options_json, result_json=None, error=None)
        with self._sessions.begin() as session:
            session.add(row)
        return self.get(sim_id) or row

    def get(self, sim_id: str) -> SimulationRow | None:
        with Session(self.engine, expire_on_commit=False) as session:
            return session.scalars(select(SimulationRow).where(SimulationRow.id == sim_id)).one_or_none()

    def transition(self, sim_id: str, state: str, from_: tuple[str, ...], error: str | None = None,
                   result_json: str | None = None) -> bool:
        """Set ``state`` (and ``error``, ``result_json``) when the job is in one of ``from_``; True when it was."""
        with self._sessions.begin() as session:
            result = session.execute(update(SimulationRow)
                                     .where(SimulationRow.id == sim_id, SimulationRow.state.in_(from_))
                                     .values(state=state, error=error, result_json=result_json, updated_at=utc_now()))
        return result.rowcount == 1

    def with_state(self, states: tuple[str, ...]) -> list[str]:
        """Ids of the jobs in one of ``states``, oldest first."""
        with Session(self.engine) as session:
            return list(session.scalars(select(SimulationRow.id).where(SimulationRow.state.in_(states))
                                        .order_by(SimulationRow.seq)).all())
