"""Seeded bugs of homework 5: small patches against solutions/, each expected to cost its task points.

The same bugs are in the kit's mutation-suite format in autograder/mutants/hw5/*.patch (task, what,
unified diff); once the suite's runner is on this branch (`python -m autograder.mutants hw5`), this
module can go.

    .venv/bin/python -m autograder.hw5.mutants            # grade every mutant, print what each loses
    .venv/bin/python -m autograder.hw5.mutants warmup     # the mutants whose name contains "warmup"

A mutant is (name, task, file under solutions/minitorch_dist/pipeline, [(old, new), ...]); every old
text must occur in the file. The table gives the points its task lost (single-task tests only) and
the first failing test's first line, which is what a student reads.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = "minitorch_dist/pipeline"
G, O, S, C, B = "gpipe.py", "one_f_one_b.py", "schedules.py", "checkpoint.py", "boundary.py"

MUTANTS = [
    ("gpipe_loss_not_divided_by_m", "5.2", G, [("targets[i], 1.0 / m)", "targets[i], 1.0)")]),
    ("gpipe_step_per_microbatch", "5.2", G,
     [("        grad_input = backward_step(stage, i, grad_output)\n",
       "        grad_input = backward_step(stage, i, grad_output)\n        optimizer.step()\n")]),
    ("gpipe_no_zero_grad", "5.2", G, [("    optimizer.zero_grad()\n", "")]),
    ("gpipe_backward_right_after_forward", "5.2", G,
     [("            handles.append(send_forward(stage, y, i))\n    for i in range(m):",
       "            handles.append(send_forward(stage, y, i))\n    for i in range(m):\n        pass\n"
       "    for i in []:"),
      ("        y = forward_step(stage, i, x, targets[i], 1.0 / m)\n",
       "        y = forward_step(stage, i, x, targets[i], 1.0 / m)\n"
       "        if not stage.is_last:\n            handles.append(send_forward(stage, y, i))\n"
       "        else:\n            losses.append(y.detach())\n"
       "        g = backward_step(stage, i, None if stage.is_last else recv_backward(stage, i))\n"
       "        if not stage.is_first:\n            handles.append(send_backward(stage, g, i))\n"
       "        continue\n")]),
    ("1f1b_loss_not_divided_by_m", "5.3", O, [("targets[i], 1.0 / m)", "targets[i], 1.0)")]),
    ("1f1b_warmup_off_by_one", "5.3", O, [("return min(n_stages - stage_index - 1, n_microbatches)",
                                           "return min(n_stages - stage_index, n_microbatches)")]),
    ("1f1b_zero_grad_per_microbatch", "5.3", O,
     [("    def one_backward(i: int) -> None:\n", "    def one_backward(i: int) -> None:\n        optimizer.zero_grad()\n")]),
    ("1f1b_blocking_sends", "5.3", O, [("            handles.append(send_forward(stage, y, i))",
                                        "            send_forward(stage, y, i).wait()"),
                                       ("            handles.append(send_backward(stage, grad_input, i))",
                                        "            send_backward(stage, grad_input, i).wait()")]),
    ("1f1b_returns_last_microbatch_loss", "5.3", O,
     [("    return sum(losses) if stage.is_last else None", "    return losses[-1] * m if stage.is_last else None")]),
    ("boundary_gradient_not_sent_back", "5.1", B,
     [("isend(grad_input, stage.prev_rank", "isend(torch.zeros_like(grad_input), stage.prev_rank")]),
    ("boundary_backward_sent_the_wrong_way", "5.1", B,
     [("isend(grad_input, stage.prev_rank", "isend(grad_input, stage.next_rank if stage.next_rank is not None else "
                                          "stage.prev_rank"),
      ("grad_output, stage.next_rank, tag", "grad_output, stage.prev_rank if stage.prev_rank is not None else "
                                           "stage.next_rank, tag")]),
    ("boundary_activations_freed_after_send", "5.1", B,
     [("    return stage.group.isend(output.detach()",
       "    stage.stash[microbatch] = (stage.stash[microbatch][0], output.detach())\n"
       "    return stage.group.isend(output.detach()")]),
    ("boundary_received_input_without_grad", "5.1", B,
     [("return activation.requires_grad_() if activation.is_floating_point() else activation", "return activation"),
      ("return None if stage.is_first else x.grad\n    # END SOLUTION\n",
       "return None if stage.is_first else (x.grad if x.grad is not None else torch.zeros_like(x))\n"
       "    # END SOLUTION\n")]),
    ("boundary_shape_sent_first", "5.1", B,
     [("    return stage.group.isend(output.detach()",
       "    stage.group.isend(torch.tensor(output.shape), stage.next_rank, tag=2047)\n"
       "    return stage.group.isend(output.detach()"),
      ("    activation = stage.spec.input_buffer()\n",
       "    activation = stage.spec.input_buffer()\n"
       "    stage.group.recv(torch.zeros(len(activation.shape), dtype=torch.int64), stage.prev_rank, tag=2047)\n")]),
    ("schedule_1f1b_warmup_off_by_one", "5.4", S, [("warmup = min(n_stages - j - 1, n_microbatches)",
                                                    "warmup = min(n_stages - j, n_microbatches)")]),
    ("schedule_missing_send_before_last", "5.4", S, [("    if stage_index < n_stages - 1:\n        actions.append(Action(\"SEND_F\"",
                                                      "    if stage_index < n_stages - 2:\n        actions.append(Action(\"SEND_F\"")]),
    ("schedule_gpipe_interleaved", "5.4", S,
     [("        lane = [a for i in range(n_microbatches) for a in forward_actions(j, n_stages, i)]\n"
       "        lane += [a for i in range(n_microbatches) for a in backward_actions(j, n_stages, i)]\n",
       "        lane = [a for i in range(n_microbatches)\n"
       "                for a in forward_actions(j, n_stages, i) + backward_actions(j, n_stages, i)]\n")]),
    ("checkpoint_keeps_the_graph", "5.5", C, [("    with torch.no_grad():\n        output = stage.run(x)",
                                               "    with torch.enable_grad():\n        output = stage.run(x)")]),
    ("checkpoint_recompute_unscaled_loss", "5.5", C,
     [("            recomputed = stage.loss_fn(recomputed, target) * loss_scale",
       "            recomputed = stage.loss_fn(recomputed, target)")]),
]


def make_submission(folder: str, mutant) -> str:
    """solutions' editable files of homework 5 under `folder`, with the mutant's patches applied."""
    _, _, target, patches = mutant
    for name in (G, O, S, C, B):
        with open(os.path.join(ROOT, "solutions", PKG, name)) as f:
            text = f.read()
        if name == target:
            for old, new in patches:
                if old not in text:
                    raise ValueError(f"mutant {mutant[0]}: {old!r} is not in {name}")
                text = text.replace(old, new)
        os.makedirs(os.path.join(folder, PKG), exist_ok=True)
        with open(os.path.join(folder, PKG, name), "w") as f:
            f.write(text)
    return folder


def task_share(results: dict, task: str) -> tuple[float, float, str]:
    """(points lost, points) over the tests of `task` alone, and the first failing test's first line."""
    lost = total = 0.0
    first = ""
    for t in results["tests"][1:]:
        if not t["name"].startswith(f"HW5 {task} "):
            continue
        total += t["max_score"]
        lost += t["max_score"] - t["score"]
        if t["score"] < t["max_score"] and not first:
            lines = [x for x in t["output"].splitlines() if x.strip() and "cases passed" not in x and x != "Failed."
                     and not x.rstrip().endswith("cases failed:")]
            first = f"{t['name'].rsplit(': ', 1)[-1]}: {lines[1][:150] if len(lines) > 1 else ''}"
    return lost, total, first


def main(argv=None) -> int:
    from autograder.grade import grade
    pick = (argv if argv is not None else sys.argv[1:]) or [""]
    rows = []
    for mutant in [m for m in MUTANTS if any(p in m[0] for p in pick)]:
        folder = make_submission(tempfile.mkdtemp(prefix="hw5-mutant-"), mutant)
        try:
            results = grade("hw5", folder, out=None, quiet=True, jobs=2)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        lost, total, first = task_share(results, mutant[1])
        rows.append((mutant[0], mutant[1], lost, total, results["score"], first))
        print(f"{mutant[0]:40s} {mutant[1]}  lost {lost:5.1f}/{total:4.1f} of its task ({100 * lost / max(total, 1):3.0f}%)"
              f"  total {results['score']:.1f}  {first}", flush=True)
    caught = [r for r in rows if r[2] >= 0.25 * r[3] > 0]
    print(f"{len(caught)} of {len(rows)} mutants lose at least 25% of their task")
    return 0 if len(caught) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
