"""Homework 5: pipeline parallelism. Stage j of a model lives on rank j; micro-batches flow forward
through the stages and their gradients flow back.

    stages_of, balance_by_params                   provided: split a model by parameter count
    pipeline_spec, StageSpec, split_microbatches   provided: what crosses each boundary
    PipelineStage                                  provided: one rank's stage
    send_forward, recv_forward, send_backward,
    recv_backward, forward_step, backward_step     5.1  the stage boundary
    gpipe_step                                     5.2  GPipe: all forwards, then all backwards
    one_f_one_b_step, warmup_forwards              5.3  1F1B: warm-up, one forward one backward, drain
    forward_actions, backward_actions,
    gpipe_schedule, one_f_one_b_schedule           5.4  schedules as data
    Action, format_schedule, validate_schedule,
    schedule_step                                  provided: actions, validator, executor
    checkpointed_forward, checkpointed_backward    5.5  activation checkpointing
    pipeline_grid, replica_share,
    average_gradients, data_parallel_step          5.6  (bonus) data parallel over pipeline replicas
    interleaved_schedule                           5.7  (bonus) interleaved 1F1B, v chunks per rank
    ChunkGroup, chunk_stages                       provided: a rank's chunks for interleaved schedules
    vocab_shard, sum_onto_owner, embed_forward,
    embed_backward, head_forward_backward          5.8  (bonus) vocabulary layers sharded over every rank
    vocab_pipeline_parts, vocab_pipeline_step      provided: a CharTransformer pipeline around them
"""

from .actions import Action, format_schedule, parse_action, parse_schedule
from .boundary import backward_step, forward_step, recv_backward, recv_forward, send_backward, send_forward
from .checkpoint import checkpointed_backward, checkpointed_forward
from .chunks import ChunkGroup, chunk_stages
from .data_parallel import average_gradients, data_parallel_step, pipeline_grid, replica_share
from .executor import run_actions, schedule_step
from .gpipe import gpipe_step
from .one_f_one_b import one_f_one_b_step, warmup_forwards
from .partition import balance_by_params, char_transformer_layers, mlp_layers, split_layers, stages_of
from .schedules import backward_actions, forward_actions, gpipe_schedule, interleaved_schedule, one_f_one_b_schedule
from .spec import StageSpec, pipeline_spec, split_microbatches
from .stage import MAX_MICROBATCHES, PipelineStage, backward_tag, forward_tag
from .validate import ScheduleError, validate_schedule
from .vocab import embed_backward, embed_forward, head_forward_backward, sum_onto_owner, vocab_shard
from .vocab_pipeline import vocab_pipeline_parts, vocab_pipeline_step

__all__ = ["Action", "format_schedule", "parse_action", "parse_schedule", "send_forward", "recv_forward",
           "send_backward", "recv_backward", "forward_step", "backward_step", "checkpointed_forward",
           "checkpointed_backward", "run_actions", "schedule_step", "gpipe_step", "one_f_one_b_step",
           "warmup_forwards", "balance_by_params", "char_transformer_layers", "mlp_layers", "split_layers",
           "stages_of", "forward_actions", "backward_actions", "gpipe_schedule", "one_f_one_b_schedule",
           "StageSpec", "pipeline_spec", "split_microbatches", "MAX_MICROBATCHES", "PipelineStage",
           "forward_tag", "backward_tag", "ScheduleError", "validate_schedule", "ChunkGroup", "chunk_stages",
           "interleaved_schedule", "pipeline_grid", "replica_share", "average_gradients", "data_parallel_step",
           "vocab_shard", "sum_onto_owner", "embed_forward", "embed_backward", "head_forward_backward",
           "vocab_pipeline_parts", "vocab_pipeline_step"]
