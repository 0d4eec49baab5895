# The planner service. CPU-only: the service plans, it does not train.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

# The CPU build of torch first, so the torch>= range does not pull a CUDA build.
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch>=2.3"
COPY pyproject.toml README.md ./
COPY planner ./planner
COPY api ./api
RUN pip install .

RUN useradd --create-home planner && mkdir -p /data && chown planner /data
USER planner
ENV PLANNER_DATABASE_URL=sqlite:////data/planner.db
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"
CMD ["planner", "serve", "--host", "0.0.0.0", "--port", "8000"]
