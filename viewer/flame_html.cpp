// The reports' import-time chart (see flame_html.h). The page gets the data as JSON and
// draws it with a small script: drawing in the browser keeps the page small (one record
// per import, not one element per bar at every zoom level) and lets it zoom.
#include "flame_html.h"
#include "char_escaper.h"

#include <sstream>

#include "commands.h"
#include "import_time.h"
#include "json_writer.h"

namespace imptrace {
namespace html {

std::string escape(const std::string& s) {
  static const CharEscaper kHtml(
      {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&#39;"}, {'\n', "\n"}, {'\t', "\t"}},
      "?");
  return kHtml(s);
}

const char kFlameStyle[] = R"(
.fthread{margin:.4em 0 1em}.fhead{font-size:.9em;margin-bottom:2px}.fcrumb{color:#0645ad;cursor:pointer;text-decoration:underline}
.fchart{position:relative;background:#fafafa;border:1px solid #eee;overflow:hidden}
.fbar{position:absolute;height:17px;box-sizing:border-box;border:1px solid #fff;background:#e8a44a;color:#222;font-size:11px;line-height:15px;overflow:hidden;white-space:nowrap;padding-left:2px;cursor:pointer}
.fbar:hover{filter:brightness(.85)}.fbar.fail{background:#999;color:#fff}.fbar.prop{background:#b00020;color:#fff}.fbar.hot{outline:2px solid #d8007a;outline-offset:-2px;font-weight:bold}.fbar.hot:not(.fail):not(.prop){background:#f4a6c8}
.finfo{font:12px/1.35 ui-monospace,monospace;white-space:pre-wrap;min-height:4em;background:#f6f6f6;padding:4px;margin-top:2px}
)";

// Data (JSON, in <script type="application/json" id=...>): {"threads":[{"id","roots"}],
// "n":[[name, begin_ns, cumulative_ns, self_ns, fate (0 ok, 1 handled, 2 propagated),
// importer, test, parent (-1 none), marked (0|1), error]]}.
const char kFlameScript[] = R"(
(function(){
function ms(ns){return (ns/1e6).toFixed(3);}
var FATE=['','FAILED (handled by its importer): ','FAILED (propagated): '];
function describe(r){
  var s=r[0]+'\ncumulative '+ms(r[2])+' ms, self '+ms(r[3])+' ms';
  if(r[4])s+='\n'+FATE[r[4]]+r[9];
  s+='\nimported at '+(r[5]||'(no Python frame)');
  if(r[6])s+='\ntest '+r[6];
  return s;
}
document.querySelectorAll('div.flame').forEach(function(box){
  var d=JSON.parse(document.getElementById(box.getAttribute('data-src')).textContent);
  var N=d.n,kids=[],depth=[];
  for(var i=0;i<N.length;i++){kids.push([]);var p=N[i][7];depth.push(p>=0?depth[p]+1:0);if(p>=0)kids[p].push(i);}
  d.threads.forEach(function(th){
    var sec=document.createElement('div');sec.className='fthread';
    var head=document.createElement('div');head.className='fhead';
    var chart=document.createElement('div');chart.className='fchart';
    var info=document.createElement('div');info.className='finfo';
    info.textContent='Hover over an import for its times, importer and test; click to zoom in.';
    sec.appendChild(head);sec.appendChild(chart);sec.appendChild(info);box.appendChild(sec);
    var lo=Infinity,hi=0,total=0;
    th.roots.forEach(function(r){lo=Math.min(lo,N[r][1]);hi=Math.max(hi,N[r][1]+N[r][2]);total+=N[r][2];});
    var view=-1;
    function crumb(text,target){
      var a=document.createElement('span');a.className='fcrumb';a.textContent=text;
      a.addEventListener('click',function(){view=target;render();});return a;
    }
    function render(){
      head.textContent='thread '+th.id+' \u2014 '+ms(total)+' ms in '+th.roots.length+' top-level imports';
      if(view>=0){
        var path=[];for(var a=view;a>=0;a=N[a][7])path.unshift(a);
        head.appendChild(document.createTextNode(' \u2014 zoomed: '));
        head.appendChild(crumb('all',-1));
        path.forEach(function(a){head.appendChild(document.createTextNode(' \u203a '));head.appendChild(crumb(N[a][0],a));});
      }
      var v0=view<0?lo:N[view][1],v1=view<0?hi:N[view][1]+N[view][2];
      var span=Math.max(1,v1-v0),W=chart.clientWidth||1000,base=view<0?0:depth[view];
      chart.textContent='';
      var frag=document.createDocumentFragment(),maxd=0,stack=view<0?th.roots.slice():[view];
      while(stack.length){
        var i=stack.pop(),r=N[i],x0=Math.max(r[1],v0),x1=Math.min(r[1]+r[2],v1),w=(x1-x0)/span*W;
        if(w<1)continue;  // its children are narrower still
        var dd=depth[i]-base;maxd=Math.max(maxd,dd);
        var b=document.createElement('div');
        b.className='fbar'+(r[4]==2?' prop':r[4]?' fail':'')+(r[8]?' hot':'');
        b.style.left=((x0-v0)/span*W).toFixed(1)+'px';b.style.width=w.toFixed(1)+'px';b.style.top=(dd*18)+'px';
        b.title=describe(r);b.setAttribute('data-i',i);
        if(w>30)b.textContent=r[0];
        frag.appendChild(b);
        for(var k=kids[i].length-1;k>=0;k--)stack.push(kids[i][k]);
      }
      chart.style.height=((maxd+1)*18)+'px';chart.appendChild(frag);
    }
    chart.addEventListener('mouseover',function(e){var i=e.target.getAttribute('data-i');if(i!==null)info.textContent=describe(N[+i]);});
    chart.addEventListener('click',function(e){var i=e.target.getAttribute('data-i');if(i!==null){view=+i;render();}});
    window.addEventListener('resize',render);
    render();
  });
});
})();
)";

void write_flame(const model::Process& p, const std::string& id, const std::set<std::string>& marked,
                 std::ostream& out) {
  const timing::ImportTree t = timing::build_tree(p);
  const std::vector<timing::Fate> fate = timing::classify_failures(p);
  const auto roots = p.sys_path_roots();
  std::ostringstream js;
  JsonWriter w(js, false);
  w.begin_object();
  w.key("threads");
  w.begin_array();
  for (const auto& th : t.threads) {
    w.begin_object();
    w.field("id", th.id);
    w.key("roots");
    w.begin_array();
    for (size_t r : th.roots) w.value(r);
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.key("n");
  w.begin_array();
  for (size_t i = 0; i < p.imports.size(); ++i) {
    const auto& im = p.imports[i];
    model::Location at = im.importer;
    at.file = model::relativize_path(im.importer.file, roots);
    int64_t parent = im.parent_pos >= 0 && static_cast<size_t>(im.parent_pos) < i ? im.parent_pos : -1;
    w.begin_array();
    w.value(im.name.str());
    w.value(im.begin_ns);
    w.value(im.duration_ns());
    w.value(t.self_ns[i]);
    w.value(static_cast<int>(fate[i]));
    w.value(at.empty() ? std::string() : format_location(at));
    w.value(im.test.str());
    w.value(parent);
    w.value(marked.count(im.name.str()) ? 1 : 0);
    w.value(im.error_text());
    w.end_array();
  }
  w.end_array();
  w.end_object();
  // '<' only occurs inside JSON strings, where \u003c means the same: no "</script>" can
  // end the data element early.
  std::string data;
  for (char c : js.str()) {
    if (c == '<') data += "\\u003c";
    else data += c;
  }
  out << "<div class=\"flame\" data-src=\"" << escape(id) << "\"></div>\n<script type=\"application/json\" id=\""
      << escape(id) << "\">" << data << "</script>\n";
}

}  // namespace html
}  // namespace imptrace
