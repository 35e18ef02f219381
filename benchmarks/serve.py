"""Load test of ``cxrils serve`` on loopback: 50 concurrent POST /v1/segment requests.

Prints p50 / p95 latency and the error count. Usage::

    python -m benchmarks.serve [--model RUN_DIR] [--requests 50] [--image PATH] [--publish serve]

The model defaults to the built-in light model; the image to a real NIH CXR from
../shared/data. Traffic goes to 127.0.0.1 only; the loop is bounded. ``--publish serve``
writes ``docs/results/serve.md`` (``benchmarks/results.py``).
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import threading
import time
from pathlib import Path

from benchmarks.results import DEFAULT_DATA, benchmark_parser, publish_if_asked


def main() -> None:
    ap = benchmark_parser(__doc__.splitlines()[0], page="serve")
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--image", type=Path, default=None)
    args = ap.parse_args()

    import httpx
    import uvicorn

    from cxrils.cli.serve import default_model_dir
    from cxrils.models.base import Segmenter
    from cxrils.serve.app import create_app

    run_dir = args.model or default_model_dir()
    if run_dir is None:
        raise SystemExit("no --model and no built-in light model; train one with cxrils train")
    image = args.image or next(iter(sorted((DEFAULT_DATA / "nih_bbox").rglob("*.png"))), None)
    if image is None:
        raise SystemExit("no image: pass --image PATH")
    seg = Segmenter.from_pretrained(run_dir)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(seg), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    data = image.read_bytes()
    instructions = [
        "Segment the effusion in the right lung base.",
        "Segment the pneumonia.",
        "Segment the opacity in the left mid zone lung and predict its type.",
        "Segment the cardiomegaly.",
    ]

    async def one(client: httpx.AsyncClient, i: int) -> tuple[float, bool]:
        t0 = time.perf_counter()
        try:
            r = await client.post(
                "/v1/segment",
                files={"image": (image.name, data, "image/png")},
                data={"instruction": instructions[i % len(instructions)]},
            )
            ok = r.status_code == 200
        except httpx.HTTPError:
            ok = False
        return time.perf_counter() - t0, ok

    async def run() -> list[tuple[float, bool]]:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
            return await asyncio.gather(*(one(client, i) for i in range(args.requests)))

    t0 = time.perf_counter()
    results = asyncio.run(run())
    wall = time.perf_counter() - t0
    server.should_exit = True
    lat = sorted(r[0] for r in results)
    errors = sum(not r[1] for r in results)
    p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))]
    print(f"model: {run_dir}")
    print(f"requests: {len(results)} concurrent, wall {wall:.2f} s, throughput {len(results) / wall:.1f} req/s")
    print(f"latency p50: {statistics.median(lat) * 1000:.0f} ms, p95: {p95 * 1000:.0f} ms")
    print(f"errors: {errors}")
    from PIL import Image

    with Image.open(image) as im:
        size = f"{im.width}x{im.height}"
    publish_if_asked(
        args,
        "\n".join(
            [
                f"{len(results)} concurrent `POST /v1/segment` requests on 127.0.0.1 (one uvicorn process, inference "
                f"serialised by the service's lock), model `{Path(run_dir).name}`, image {image.name} ({size} PNG), "
                f"{len(instructions)} instructions in turn.",
                "",
                "| requests | wall time | throughput | latency p50 | latency p95 | errors |",
                "|---:|---:|---:|---:|---:|---:|",
                f"| {len(results)} | {wall:.2f} s | {len(results) / wall:.1f} requests/s | "
                f"{statistics.median(lat) * 1000:.0f} ms | {p95 * 1000:.0f} ms | {errors} |",
            ]
        ),
    )


if __name__ == "__main__":
    main()
