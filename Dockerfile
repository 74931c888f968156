# clusterbot: `clusterbot serve` in a slim, non-root image.
# Build: docker build -t clusterbot .   Run: docker run -p 8080:8080 --env-file .env clusterbot

# --- build: a wheel of the project and of its runtime dependencies only --------------------
FROM python:3.11-slim AS build
WORKDIR /src
RUN python -m pip install --no-cache-dir --upgrade pip build
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY handlers ./handlers
# The local stand-ins (demo, sandbox, simulator) are for tests and laptops, not production.
RUN rm -rf bot/sandbox \
 && python -m build --wheel --outdir /wheels . \
 && python -m pip wheel --no-cache-dir --wheel-dir /wheels /wheels/clusterbot-*.whl

# --- run ---------------------------------------------------------------------------------
FROM python:3.11-slim AS run
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PORT=8080 \
    CLUSTERBOT_DATABASE_URL=sqlite+aiosqlite:////var/lib/clusterbot/clusterbot.db
RUN groupadd --system clusterbot \
 && useradd --system --gid clusterbot --home-dir /var/lib/clusterbot --create-home clusterbot
COPY --from=build /wheels /wheels
RUN python -m pip install --no-cache-dir --no-index --find-links /wheels clusterbot \
 && rm -rf /wheels
USER clusterbot
WORKDIR /var/lib/clusterbot
# The cost chart's fonts, found once here rather than at the first chart (about a second).
ENV MPLBACKEND=Agg
RUN python -c "import matplotlib.font_manager"
EXPOSE 8080
# No curl in a slim image: Python asks /healthz on the port the service listens on.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ.get('PORT', '8080')}/healthz\", timeout=4)"]
# SIGTERM (docker stop, App Engine) drains: no new work, work in flight finished or handed back.
STOPSIGNAL SIGTERM
ENTRYPOINT ["clusterbot"]
CMD ["serve"]
