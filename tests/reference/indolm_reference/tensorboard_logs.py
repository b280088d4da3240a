"""TensorBoard references: indolm's event files as TensorBoard's own readers load them.

  tb-scalars LOGDIR       every scalar tag with its steps and values, read by TensorBoard's own
                          EventAccumulator, as JSON on stdout.
  tb-bias LOGDIR          each TensorBoard run under LOGDIR as TensorBoard's backend loads it
                          (plugin_event_accumulator, with the simple_value migration): its scalar
                          tags with steps and values, each tag's description, and the
                          custom-scalars layout parsed with layout_pb2; JSON on stdout.
"""
import json
import os


def tb_scalars(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(logdir, size_guidance={"scalars": 0})
    acc.Reload()
    out = {tag: [[e.step, e.value] for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    print(json.dumps(out))


def plugin_tags(acc, plugin):
    """The tags `plugin` wrote in a run (none when the run has none of its data: TensorBoard's
    accumulator raises KeyError then)."""
    try:
        return acc.PluginTagToContent(plugin)
    except KeyError:
        return {}


def tb_bias(logdir):
    from google.protobuf import json_format
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea
    from tensorboard.plugins.custom_scalar import layout_pb2
    from tensorboard.util import tensor_util

    out = {}
    for run in sorted(os.listdir(logdir)):
        path = os.path.join(logdir, run)
        if not os.path.isdir(path):
            continue
        acc = pea.EventAccumulator(path, size_guidance={"tensors": 0})
        acc.Reload()
        scalar_tags = sorted(plugin_tags(acc, "scalars"))
        scalars = {t: [[e.step, float(tensor_util.make_ndarray(e.tensor_proto))] for e in acc.Tensors(t)] for t in scalar_tags}
        descriptions = {t: acc.SummaryMetadata(t).summary_description for t in scalar_tags}
        layout = None
        if "custom_scalars__config__" in plugin_tags(acc, "custom_scalars"):
            proto = layout_pb2.Layout()
            proto.ParseFromString(acc.Tensors("custom_scalars__config__")[0].tensor_proto.string_val[0])
            layout = json_format.MessageToDict(proto)
        out[run] = {"scalars": scalars, "descriptions": descriptions, "layout": layout}
    print(json.dumps(out))
